/**
 * Child process of crash-only.test.ts: runMain with a start that succeeds, then fails the way
 * CRASH_KIND (argv[2]) says, outside any request: `reject` leaves a promise rejection nobody
 * handles, `throw` throws from a timer. The process must log it at fatal and exit 70.
 */
import { runMain } from '../../platform/infra/main';

const kind = process.argv[2];
runMain('crashtest', async () => {
  setImmediate(() => {
    if (kind === 'reject') void Promise.reject(new Error('a rejection nobody handles'));
    else throw new Error('an exception nobody catches');
  });
  // Kept alive by a timer, as a real process is by its sockets; the crash must end it anyway.
  const alive = setInterval(() => {}, 1000);
  return { stop: async () => clearInterval(alive) };
});
