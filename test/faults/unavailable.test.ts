import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express from 'express';
import {
  MongoBulkWriteError,
  MongoNetworkError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  type MongoClient,
} from 'mongodb';
import { errorHandler } from '../../api/middleware/errors';
import {
  DatabaseHealth,
  PROBE_EVERY_MS,
  isDatabaseUnavailable,
  isDatabaseUnreachable,
} from '../../platform/infra/db-health';
import { AppError, toAppError } from '../../platform/infra/errors';
import { createLogger } from '../../platform/infra/log';

/**
 * How a database that is away reaches a client: which driver and FerretDB errors mean "retry
 * later" (503 service_unavailable with Retry-After) and which stay errors (500), and how a
 * process decides its database is down and up again (platform/infra/db-health.ts).
 */
const ferretdb = (message: string) => new MongoServerError({ code: 1, errmsg: message, ok: 0 });

describe('database unavailable: errors and health', () => {
  it('when the driver cannot reach the server, or FerretDB cannot reach PostgreSQL, then the error is a 503 service_unavailable with Retry-After', () => {
    const unreachable = [
      new MongoNetworkError('connect ECONNREFUSED 127.0.0.1:27017'),
      new MongoServerSelectionError('Server selection timed out after 5000 ms', {
        type: 'Unknown',
        servers: new Map(),
      } as never),
      ferretdb(
        '[msg_find.go:344 handler.handleMaxTimeMSError] failed to connect to `user=postgres database=ferretdb`: dial error: connect: connection refused',
      ),
      ferretdb(
        '[msg_insert.go:168 handler.(*Handler).MsgInsert] FATAL: terminating connection due to administrator command (SQLSTATE 57P01)',
      ),
      ferretdb(
        'failed to connect to `user=postgres database=ferretdb`: server error: FATAL: the database system is starting up (SQLSTATE 57P03)',
      ),
      // insertMany / bulkWrite rewrap a network error: the message and labels stay, the class goes.
      new MongoBulkWriteError(new MongoNetworkError('connect ECONNREFUSED 127.0.0.1:27017'), {} as never),
    ];
    for (const err of unreachable) {
      expect(isDatabaseUnreachable(err), err.message).to.equal(true);
      const e = toAppError(err, { request: true });
      expect([e.code, e.status, e.headers['Retry-After'], e.quiet], err.message).to.deep.equal([
        'service_unavailable',
        503,
        '1',
        true,
      ]);
    }
    // A timeout of the operation's own, a primary stepping down: retry later too, but not "down",
    // and logged with the request.
    for (const err of [
      new MongoOperationTimeoutError('Timed out after 2000 ms'),
      new MongoServerError({ code: 10107, errmsg: 'not primary', ok: 0 }),
    ]) {
      expect([isDatabaseUnreachable(err), isDatabaseUnavailable(err)]).to.deep.equal([false, true]);
      expect([toAppError(err).status, toAppError(err).quiet]).to.deep.equal([503, false]);
    }
    // A bare socket error the driver let through (a write to a connection the server closed).
    const epipe = Object.assign(new Error('This socket has been ended by the other party'), { code: 'EPIPE' });
    expect([isDatabaseUnavailable(epipe), toAppError(epipe).status]).to.deep.equal([true, 503]);
    // Wrapped one level down, still the database.
    expect(toAppError(new Error('settling failed', { cause: new MongoNetworkError('socket closed') })).status).to.equal(
      503,
    );
  });

  it('when the server refuses a command for itself (a duplicate key, a FerretDB error of its own), then it stays a 500 internal_error', () => {
    for (const err of [
      new MongoServerError({ code: 11000, errmsg: 'E11000 duplicate key', ok: 0 }),
      ferretdb('ERROR: relation "c___b4e61f13" already exists (SQLSTATE 42P07)'),
      new Error('boom'),
    ]) {
      expect(isDatabaseUnavailable(err), err.message).to.equal(false);
      expect(toAppError(err).code).to.equal('internal_error');
    }
  });

  it('when any 503 is answered, then it carries Retry-After and the Error shape', async () => {
    const app = express();
    app.get('/engine', () => {
      throw new AppError('service_unavailable', 'the image provider is away');
    });
    app.get('/database', () => {
      throw new MongoNetworkError('connect ECONNREFUSED');
    });
    app.use(errorHandler(createLogger('silent')));
    const server = app.listen(0);
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const [path, retryAfter] of [
        ['/engine', '5'],
        ['/database', '1'],
      ] as const) {
        const r = await fetch(base + path);
        expect(r.status).to.equal(503);
        expect(r.headers.get('retry-after')).to.equal(retryAfter);
        expect(((await r.json()) as { error: { code: string } }).error.code).to.equal('service_unavailable');
      }
    } finally {
      server.close();
    }
  });

  it('when commands fail as unreachable, then the health is down and probes twice a second until its read succeeds; nothing else brings it up', async () => {
    const client = new EventEmitter();
    let probes = 0;
    let answer = false;
    const health = new DatabaseHealth(async () => {
      probes++;
      if (!answer) throw new MongoNetworkError('connect ECONNREFUSED');
    });
    health.watch(client as unknown as MongoClient);
    const events: string[] = [];
    health.on('down', ({ reason }) => events.push(`down: ${reason}`));
    health.on('up', () => events.push('up'));
    try {
      health.commandFailed(
        ferretdb(
          '[msg_find.go:344 handler.handleMaxTimeMSError] [values.go:74 iterator.ConsumeValuesN[...]] FATAL: terminating connection due to administrator command (SQLSTATE 57P01)',
        ),
      );
      expect(health.reason, 'without the Go frames').to.equal(
        'FATAL: terminating connection due to administrator command (SQLSTATE 57P01)',
      );
      answer = true;
      await health.whenUp();
      answer = false;
      events.length = 0;
      probes = 0;
      health.commandFailed(new MongoServerError({ code: 11000, errmsg: 'E11000', ok: 0 }));
      health.commandFailed(new MongoOperationTimeoutError('Timed out after 2000 ms'));
      expect(health.up, 'a duplicate key or a timeout of our own is not an outage').to.equal(true);
      client.emit('connectionCheckOutFailed', { reason: 'connectionError', address: '127.0.0.1:27017' });
      expect(health.up).to.equal(false);
      expect(health.reason).to.equal('cannot open a connection to 127.0.0.1:27017');
      // The driver seeing its server again is not enough after commands failed: FerretDB answers
      // hello (and a find on a collection it does not know) without its PostgreSQL.
      client.emit('topologyDescriptionChanged', {
        newDescription: { type: 'Single', servers: new Map([['a', { type: 'Standalone' }]]), error: null },
      });
      expect(health.up).to.equal(false);
      const waiting = health.whenUp();
      await new Promise((r) => setTimeout(r, PROBE_EVERY_MS * 2.5));
      expect(probes).to.be.within(2, 4);
      answer = true;
      await waiting;
      expect(health.up).to.equal(true);
      expect(events).to.deep.equal(['down: cannot open a connection to 127.0.0.1:27017', 'up']);
      const settled = probes;
      await new Promise((r) => setTimeout(r, PROBE_EVERY_MS * 2));
      expect(probes, 'no probe while up').to.equal(settled);

      // The driver's own view: no writable server is down too, until it sees one again.
      answer = false;
      const topology = (type: string) => ({
        newDescription: { type: 'Single', servers: new Map([['a', { type }]]), error: null },
      });
      client.emit('topologyDescriptionChanged', topology('Unknown'));
      expect(health.up).to.equal(false);
      client.emit('topologyDescriptionChanged', topology('Standalone'));
      expect(health.up).to.equal(true);
    } finally {
      health.close();
    }
  });
});
