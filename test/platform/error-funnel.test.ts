import { expect } from 'chai';
import { ERROR_SOURCES, metrics } from '../../monitoring/metrics';
import { AppError, databaseUnavailable } from '../../platform/infra/errors';
import { funnelError } from '../../platform/infra/error-funnel';
import type { Logger } from '../../platform/infra/log';

/**
 * The one error funnel (platform/infra/error-funnel.ts) behind the HTTP and MCP error handlers,
 * request/reply pools, the scheduler's tasks and the process's last-resort handlers: converts,
 * counts app_errors_total{code,source}, logs once with the stack.
 */
describe('error funnel', () => {
  let lines: { level: string; msg: string; fields?: Record<string, unknown> }[];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, fields });
  const log: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    fatal: at('fatal'),
    child: () => log,
  };
  const counted = async (source: string, code: string) => {
    const m = await metrics.errors.get();
    return m.values.find((v) => v.labels.source === source && v.labels.code === code)?.value ?? 0;
  };

  beforeEach(() => {
    lines = [];
  });

  it('when an unknown error comes through, then it becomes internal_error, is counted by source and code, and is logged once with its own stack', async () => {
    const before = await counted('scheduler', 'internal_error');
    const boom = new TypeError('cannot read x');
    const e = funnelError(boom, { source: 'scheduler', log, msg: 'task failed', fields: { task: 'jobs.sweep' } });
    expect([e.code, e.status, e.cause]).to.deep.equal(['internal_error', 500, boom]);
    expect(await counted('scheduler', 'internal_error')).to.equal(before + 1);
    expect(lines).to.deep.equal([
      { level: 'error', msg: 'task failed', fields: { task: 'jobs.sweep', code: 'internal_error', err: boom } },
    ]);
    expect((lines[0]!.fields!.err as Error).stack).to.include('cannot read x');
  });

  it("when the client's error comes through (a 4xx), then it is counted and answered but not logged", async () => {
    const before = await counted('http', 'validation_error');
    const e = funnelError(new AppError('validation_error', 'name: required'), {
      source: 'http',
      log,
      msg: 'request failed',
    });
    expect(e.status).to.equal(400);
    expect(await counted('http', 'validation_error')).to.equal(before + 1);
    expect(lines).to.deep.equal([]);
  });

  it("when a library's 4xx is raised while serving a request, then it keeps its status under a stable code", () => {
    const tooLarge = Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' });
    expect(funnelError(tooLarge, { source: 'mcp', log, msg: 'mcp request failed', request: true }).code).to.equal(
      'payload_too_large',
    );
    expect(funnelError(tooLarge, { source: 'consumer', log, msg: 'request failed', logWhen: 'never' }).code).to.equal(
      'internal_error',
    );
    expect(lines).to.deep.equal([]);
  });

  it('when the database is away (a quiet 503, said once by the process), then it is counted but not logged, unless the site logs every error', async () => {
    const before = await counted('mcp', 'service_unavailable');
    funnelError(databaseUnavailable(), { source: 'mcp', log, msg: 'mcp tool failed' });
    expect(lines).to.deep.equal([]);
    funnelError(databaseUnavailable(), { source: 'scheduler', log, msg: 'task failed', logWhen: 'always' });
    expect(lines.map((l) => [l.level, l.msg, l.fields?.code])).to.deep.equal([
      ['error', 'task failed', 'service_unavailable'],
    ]);
    expect(await counted('mcp', 'service_unavailable')).to.equal(before + 1);
  });

  it('when a process dies of a thrown non-Error, then the fatal line carries the AppError (its stack) with the value as its cause', () => {
    funnelError('a string', {
      source: 'process',
      log,
      msg: 'uncaught exception in api; exiting',
      logWhen: 'always',
      level: 'fatal',
    });
    expect(lines).to.have.length(1);
    const err = lines[0]!.fields!.err as AppError;
    expect([lines[0]!.level, err instanceof AppError, err.cause, typeof err.stack]).to.deep.equal([
      'fatal',
      true,
      'a string',
      'string',
    ]);
  });

  it('when /metrics is read, then the help text of app_errors_total lists every source, mcp included', async () => {
    const help = (await metrics.errors.get()).help;
    for (const source of ERROR_SOURCES) expect(help).to.include(source);
    expect(help).to.include('mcp');
  });
});
