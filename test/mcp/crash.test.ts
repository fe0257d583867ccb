import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { spawnApiProcess } from '../helpers/api-process';
import { eventually } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import { call, mcpClient } from './helpers';

/**
 * The `idempotencyKey` argument through a real crash: an API process killed with SIGKILL after
 * the tool made its job or project but before the key's record stored the answer
 * (FAULT_POINT idempotency.before-finish), the client retrying on another API process. The retry
 * must answer what the dead call made, charged once (test/jobs/crash-idempotency.test.ts for REST).
 */
describe('MCP: a crash between a tool call and its idempotency record (SIGKILL, retried with the same idempotencyKey)', function () {
  this.timeout(120_000);
  const LEASE_MS = 1500;
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { IDEMPOTENCY_LEASE_MS: String(LEASE_MS) } });
  });
  after(() => stack.stop());

  const cases = [
    {
      tool: 'start_code_build',
      args: { prompt: 'crash then retry' },
      idOf: (r: any) => r.structuredContent.jobId as string,
    },
    {
      tool: 'create_presentation',
      args: {
        name: 'Crash deck',
        outline: [
          { title: 'One', bullets: ['a'] },
          { title: 'Two', bullets: ['b'] },
          { title: 'Three', bullets: ['c'] },
        ],
        slideMode: 'content',
      },
      idOf: (r: any) => r.structuredContent.job.jobId as string,
    },
  ];
  for (const c of cases) {
    it(`when the API dies after ${c.tool} made its job, then the retry answers that job, charged once`, async () => {
      const { key, accountId } = await stack.createAccount({ credits: 1000 });
      const doomed = await spawnApiProcess(stack, {
        FAULT_POINT: 'idempotency.before-finish',
        IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
      });
      const args = { ...c.args, idempotencyKey: `mcp-crash-${c.tool}` };
      const transport = new StreamableHTTPClientTransport(new URL(doomed.baseUrl.replace(/\/api\/v1$/, '/mcp')), {
        requestInit: { headers: { Authorization: `Bearer ${key}` } },
      });
      const first = new Client({ name: 'svc-tests', version: '1.0.0' });
      await first.connect(transport);
      const outcome = await first.callTool({ name: c.tool, arguments: args }).then(
        () => 'answered',
        () => 'no answer',
      );
      await doomed.kill();
      await first.close().catch(() => undefined);
      const killedAt = Date.now();
      expect(outcome).to.equal('no answer');
      const made = await stack.db.jobs.find({ accountId }).toArray();
      expect(made, 'the dead call made its job').to.have.length(1);
      await stack.rt.jobs.flushAccepted();
      const balanceAfterFirst = await stack.rt.credits.balance(accountId);
      expect(balanceAfterFirst).to.be.below(1_000_000); // millicredits: 1000 credits before

      // The client retries on the API that is still up: in flight until the dead owner's lease runs out.
      const mcp = await mcpClient(stack, key);
      try {
        let retry = await call(mcp, c.tool, args);
        while (
          retry.isError &&
          retry.structuredContent?.error?.code === 'idempotency_in_flight' &&
          Date.now() - killedAt < 15_000
        ) {
          retry = await call(mcp, c.tool, args);
        }
        expect(retry.isError, JSON.stringify(retry.structuredContent)).to.not.equal(true);
        expect(c.idOf(retry)).to.equal(made[0]!._id);
        const again = await call(mcp, c.tool, args);
        expect(c.idOf(again)).to.equal(made[0]!._id);
        expect(again._meta).to.deep.include({ idempotentReplayed: true });
      } finally {
        await mcp.close();
      }
      await stack.rt.jobs.flushAccepted();
      expect(await stack.db.jobs.countDocuments({ accountId })).to.equal(1);
      expect(await stack.rt.credits.balance(accountId)).to.equal(balanceAfterFirst);
      // The dead process's ledger batch never left: the sweep writes the one entry.
      const charges = await eventually(
        async () => {
          const es = await stack.db.ledger.find({ accountId, kind: 'charge' }).toArray();
          return es.length > 0 && es;
        },
        20_000,
        'the charge ledger entry',
      );
      expect(charges.map((e) => e.jobId)).to.deep.equal([made[0]!._id]);
    });
  }
});
