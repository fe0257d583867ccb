/**
 * TESTS ONLY: deterministic crash points. With FAULT_POINT=<name> (refused in production) the
 * process kills itself with SIGKILL when it reaches that point, so a test can prove that a crash
 * exactly there loses nothing and bills nothing twice. Points: accept.after-insert,
 * accept.after-charge, accept.after-publish, idempotency.before-finish, agent.after-tool. With
 * FAULT_POINT=throw:<name> an exception nobody catches is thrown there instead: the process's
 * crash-only handler must log it and exit.
 */
let armed: string | undefined;

export function armFaultPoint(name: string | undefined): void {
  armed = name || undefined;
}

export function faultPoint(name: string): void {
  if (armed === name) process.kill(process.pid, 'SIGKILL');
  if (armed === `throw:${name}`) {
    setImmediate(() => {
      throw new Error(`fault point ${name} (FAULT_POINT)`);
    });
  }
}
