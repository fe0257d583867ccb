import { expect } from 'chai';
import { z } from 'zod';
import { metrics } from '../../monitoring/metrics';
import type { Delivery } from '../../platform/infra/amqp';
import { deadLetter, parseOrDeadLetter } from '../../platform/infra/message';
import type { Logger } from '../../platform/infra/log';

/**
 * Parse-or-dead-letter, shared by every consumer that reads JSON messages (job, consumer and
 * webhook pools, the audit writer, request/reply): a message it cannot read is dead-lettered with
 * one warning and counted in messages_dead_lettered_total{queue,reason}. The paths through the
 * broker are covered by the poison-message tests of jobs/reliability, gateway/audit,
 * webhooks/crash and images/rpc.
 */
describe('parse or dead-letter', () => {
  let lines: { level: string; msg: string; fields?: Record<string, unknown> }[];
  const log: Logger = {
    debug: () => {},
    info: () => {},
    warn: (msg, fields) => lines.push({ level: 'warn', msg, fields }),
    error: (msg, fields) => lines.push({ level: 'error', msg, fields }),
    fatal: () => {},
    child: () => log,
  };
  const delivery = (body: string) => {
    const settled: string[] = [];
    const d = {
      msg: { content: Buffer.from(body) },
      ack: () => settled.push('ack'),
      requeue: () => settled.push('requeue'),
      deadLetter: () => settled.push('deadLetter'),
    } as unknown as Delivery;
    return { d, settled };
  };
  const counted = async (queue: string, reason: string) => {
    const m = await metrics.deadLettered.get();
    return m.values.find((v) => v.labels.queue === queue && v.labels.reason === reason)?.value ?? 0;
  };
  const Schema = z.object({ jobId: z.string(), n: z.number() });

  beforeEach(() => {
    lines = [];
  });

  it('when the message matches the schema, then its value comes back and nothing is settled or said', () => {
    const { d, settled } = delivery('{"jobId":"job_1","n":2,"extra":true}');
    expect(parseOrDeadLetter(d, Schema, { queue: 'unit-a', log })).to.deep.equal({ jobId: 'job_1', n: 2 });
    expect(settled).to.deep.equal([]);
    expect(lines).to.deep.equal([]);
  });

  it('when the message is not JSON, then it is dead-lettered once with one warning (its size, never its content) and counted as invalid_json', async () => {
    const before = await counted('unit-b', 'invalid_json');
    const reasons: string[] = [];
    const { d, settled } = delivery('not json, secret-ish');
    expect(parseOrDeadLetter(d, Schema, { queue: 'unit-b', log, onDeadLettered: (r) => reasons.push(r) })).to.equal(
      undefined,
    );
    expect(settled).to.deep.equal(['deadLetter']);
    expect(reasons).to.deep.equal(['invalid_json']);
    expect(lines).to.deep.equal([
      {
        level: 'warn',
        msg: 'dead-lettering a message',
        fields: { queue: 'unit-b', reason: 'invalid_json', bytes: 20 },
      },
    ]);
    expect(await counted('unit-b', 'invalid_json')).to.equal(before + 1);
  });

  it('when the message is JSON but not the contract, then it is dead-lettered as invalid_message and the line names the fields, not their values', async () => {
    const before = await counted('unit-c', 'invalid_message');
    const { d, settled } = delivery('{"jobId":"private words","n":"three"}');
    expect(parseOrDeadLetter(d, Schema, { queue: 'unit-c', log })).to.equal(undefined);
    expect(settled).to.deep.equal(['deadLetter']);
    expect(lines).to.have.length(1);
    expect(lines[0]!.fields).to.deep.equal({ queue: 'unit-c', reason: 'invalid_message', bytes: 37, invalid: ['n'] });
    expect(JSON.stringify(lines)).not.to.include('three');
    expect(await counted('unit-c', 'invalid_message')).to.equal(before + 1);
  });

  it('when a consumer dead-letters for its own reason (a request without reply-to), then it is the same warning and metric', async () => {
    const before = await counted('unit-d', 'no_reply_to');
    const { d, settled } = delivery('{}');
    deadLetter(d, 'no_reply_to', { queue: 'unit-d', log });
    expect(settled).to.deep.equal(['deadLetter']);
    expect(lines).to.deep.equal([
      { level: 'warn', msg: 'dead-lettering a message', fields: { queue: 'unit-d', reason: 'no_reply_to', bytes: 2 } },
    ]);
    expect(await counted('unit-d', 'no_reply_to')).to.equal(before + 1);
  });
});
