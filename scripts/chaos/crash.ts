/**
 * The crash run, against the compiled supervisor (npm start's process tree):
 *   1. 60 POST /code-builds, each with its own Idempotency-Key, at about 30/s; the API process is
 *      killed with SIGKILL in the middle of the burst (the supervisor holds the connections and
 *      starts a new one); every request that got no 202 is retried with the same key until it does.
 *   2. The worker process is killed with SIGKILL three times while it holds jobs.
 * Figures: duplicate jobs, extra credits, API kill → answering again, worker kill → the killed
 * jobs completing elsewhere (p50, max). Code builds go through the OpenAI-compatible engine to a
 * local fake provider that answers after CHAOS_JOB_MS (1 s), so jobs are in flight when the
 * worker dies. Exit status 1 when a job is duplicated or a credit is off.
 */
import { fromUnits } from '../../platform/credits/credits';
import { apiPid, pct, postUntilAccepted, printFigures, sleep, startChaosRun, waitForQuiet, type Accepted } from './kit';

const LOGICAL = 60;

export async function runCrash(): Promise<boolean> {
  const run = await startChaosRun({ name: 'chaos' });
  try {
    const { db } = run;
    // --- 1. the burst, with the API killed in the middle ---------------------------------
    const answers: Accepted[] = [];
    let killedApiAt = 0;
    let apiBackAt = 0;
    const inFlight: Promise<void>[] = [];
    for (let i = 0; i < LOGICAL; i++) {
      inFlight.push(
        postUntilAccepted(run, `chaos-${run.id}-${i}`, { prompt: `chaos app ${i}` }).then((a) => void answers.push(a)),
      );
      if (i === LOGICAL / 3) {
        const killed = await apiPid(run);
        process.kill(killed, 'SIGKILL');
        killedApiAt = Date.now();
        // Back when another process answers (the supervisor holds the requests meanwhile).
        void (async () => {
          for (let pid = 0; !pid || pid === killed; pid = await apiPid(run)) await sleep(10);
          apiBackAt = Date.now();
        })();
      }
      await sleep(33);
    }
    await Promise.all(inFlight);
    const retried = answers.filter((a) => a.tries > 1);

    // --- 2. the worker killed three times while it holds jobs -----------------------------
    const takeovers: number[] = [];
    for (let round = 0; round < 3; round++) {
      // Give it work, wait until it holds some, kill the holder.
      const extra = await Promise.all(
        Array.from({ length: 4 }, (_, j) =>
          postUntilAccepted(run, `chaos-${run.id}-w${round}-${j}`, { prompt: `worker kill ${round}.${j}` }),
        ),
      );
      answers.push(...extra);
      let held: { _id: string; lease: { owner: string } | null }[] = [];
      for (const deadline = Date.now() + 30_000; held.length === 0 && Date.now() < deadline; await sleep(50)) {
        held = await db.jobs
          .find(
            { _id: { $in: extra.map((e) => e.jobId) }, status: 'processing', 'lease.owner': { $not: /^retry$/ } },
            { projection: { lease: 1 } },
          )
          .toArray();
      }
      if (!held.length) throw new Error('no job was taken by a worker');
      const pid = Number(held[0]!.lease!.owner.split(':')[1]);
      const victims = held.filter((h) => h.lease?.owner === held[0]!.lease!.owner).map((h) => h._id);
      process.kill(pid, 'SIGKILL');
      const killedAt = Date.now();
      for (const jobId of victims) {
        for (const deadline = Date.now() + 60_000; ; await sleep(50)) {
          const j = await db.jobs.findOne({ _id: jobId }, { projection: { status: 1, completedAt: 1 } });
          if (j?.status === 'complete' && j.completedAt) {
            takeovers.push(j.completedAt.getTime() - killedAt);
            break;
          }
          if (Date.now() > deadline) throw new Error(`job ${jobId} did not complete after the worker kill`);
        }
      }
    }

    // --- figures ------------------------------------------------------------------------
    await waitForQuiet(run);
    await sleep(1000); // ledger batches and the sweep settle
    const jobs = await db.jobs.find({ accountId: run.accountId }).toArray();
    const logical = new Set(answers.map((a) => a.key)).size;
    const balance = fromUnits((await db.accounts.findOne({ _id: run.accountId }))!.millicredits);
    const expectedSpend = jobs.filter((j) => j.status === 'complete').length * 5;
    printFigures('chaos run (crashes)', [
      ['logical requests (each its own Idempotency-Key)', logical],
      ['requests retried after the API kill', retried.length],
      ['jobs created', jobs.length],
      ['duplicate jobs', jobs.length - logical],
      [
        'jobs complete / failed',
        `${jobs.filter((j) => j.status === 'complete').length} / ${jobs.filter((j) => j.status === 'failed').length}`,
      ],
      ['credits spent / expected (5 a build)', `${10_000 - balance} / ${expectedSpend}`],
      ['extra credits', 10_000 - balance - expectedSpend],
      ['API killed → a new API process ready', apiBackAt ? `${apiBackAt - killedApiAt} ms` : 'n/a'],
      [
        'API kill → last retried request accepted (its key held by the dead process until IDEMPOTENCY_LEASE_MS ran out)',
        retried.length ? `${Math.max(...retried.map((a) => a.acceptedAt)) - killedApiAt} ms` : 'n/a',
      ],
      ['worker kill → killed job complete elsewhere, p50', `${pct(takeovers, 50)} ms (n=${takeovers.length})`],
      ['worker kill → killed job complete elsewhere, max', `${Math.max(...takeovers)} ms`],
      ['lease (JOB_LEASE_MS)', `${run.config.JOB_LEASE_MS} ms`],
    ]);
    return jobs.length === logical && balance === 10_000 - expectedSpend;
  } finally {
    await run.close();
  }
}
