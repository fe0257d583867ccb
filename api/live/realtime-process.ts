import type { WebSocket } from 'ws';
import { API_PLANS } from '../../contracts/registry';
import { newId } from '../../platform/infra/ids';
import type { createLiveSessions } from '../../platform/live/sessions';
import type { Runtime } from '../../platform/runtime';

/**
 * What the realtime server keeps per process besides its sockets: the heartbeat over its
 * connections (pings, session rows it owns, keys checked again) and the turn bucket per account.
 */

/** A connection of this process that owns its session's row. */
interface Owned {
  sessionId: string;
  ws: WebSocket;
  accountId: string;
  keyId: string;
}

export interface ConnectionWatch {
  /** This process's id in the session rows it owns. */
  readonly instance: string;
  /** This process's connections by connection id, for the heartbeat (owner of their session rows). */
  readonly owned: Map<string, Owned>;
  /** A new socket: it stays while it answers the pings. */
  track(ws: WebSocket): void;
  stop(): void;
}

/**
 * Every LIVE_HEARTBEAT_MS: a socket that did not answer the last ping is terminated, the others
 * pinged; the session rows of this process's connections are touched (a connection whose session
 * another process took over, or that ended, is closed), and a connection whose key was revoked,
 * lost the ai scope or whose account lost API access is closed (4403).
 */
export function watchConnections(
  rt: Runtime,
  sessions: ReturnType<typeof createLiveSessions>,
  open: Set<WebSocket>,
): ConnectionWatch {
  const { config, log } = rt;
  const instance = newId('rti');
  const owned = new Map<string, Owned>();
  /** Sockets that answered the last ping; one silent for a whole heartbeat is dead and terminated. */
  const alive = new WeakSet<WebSocket>();
  /** Last check of each key (and its account) still allowed to run a session: keyId → verdict. */
  const authChecked = new Map<string, { ok: boolean; at: number }>();
  const onAuthChange = (msg: { kind: string; keyId?: string; accountId?: string }) => {
    if (msg.kind === 'key' && msg.keyId) authChecked.delete(msg.keyId);
    else authChecked.clear();
  };
  rt.authChanges?.on('change', onAuthChange);
  /** Keys whose check is older than LIVE_AUTH_RECHECK_MS are read again, in one batch. */
  const refusedKeys = async (conns: { accountId: string; keyId: string }[]): Promise<Set<string>> => {
    const now = Date.now();
    for (const [k, v] of authChecked) if (now - v.at >= config.LIVE_AUTH_RECHECK_MS) authChecked.delete(k);
    const due = conns.filter((c) => !authChecked.has(c.keyId));
    if (due.length) {
      const keyIds = [...new Set(due.map((c) => c.keyId))];
      const live = await rt.accounts.liveKeys(keyIds);
      for (const id of keyIds) {
        const k = live.get(id);
        const ok = !!k && k.scopes.includes('ai') && API_PLANS.includes(k.plan);
        authChecked.set(id, { ok, at: now });
      }
    }
    return new Set(conns.filter((c) => authChecked.get(c.keyId)?.ok === false).map((c) => c.keyId));
  };
  let beating = false;
  const heartbeat = setInterval(() => {
    for (const ws of open) {
      if (ws.readyState !== ws.OPEN) continue;
      // No pong since the previous ping: the peer is gone (a closed laptop, a lost network).
      if (!alive.has(ws)) {
        ws.terminate();
        continue;
      }
      alive.delete(ws);
      ws.ping();
    }
    if (beating || !owned.size) return;
    beating = true;
    const snapshot = [...owned];
    Promise.all([
      sessions.heartbeat(
        instance,
        snapshot.map(([conn, o]) => ({ sessionId: o.sessionId, conn })),
      ),
      refusedKeys(snapshot.map(([, o]) => o)),
    ])
      .then(([{ lost, ended }, refused]) => {
        for (const conn of lost) {
          // A connection of another process took the session over: this one stops answering.
          owned.get(conn)?.ws.close(4409, 'superseded by a newer connection to this session');
          owned.delete(conn);
        }
        for (const conn of ended) {
          owned.get(conn)?.ws.close(1000, 'session ended');
          owned.delete(conn);
        }
        for (const [conn, o] of snapshot) {
          if (!refused.has(o.keyId) || !owned.has(conn)) continue;
          o.ws.close(
            4403,
            'the key that opened this session was revoked or lost the ai scope, or the account lost API access',
          );
          owned.delete(conn);
        }
      })
      .catch((err: unknown) => log.warn('live heartbeat failed', { err: err as Error }))
      .finally(() => (beating = false));
  }, config.LIVE_HEARTBEAT_MS);
  heartbeat.unref();
  return {
    instance,
    owned,
    track(ws) {
      alive.add(ws);
      ws.on('pong', () => alive.add(ws));
    },
    stop() {
      clearInterval(heartbeat);
      rt.authChanges?.off('change', onAuthChange);
    },
  };
}

/** Turns per account in this process: a token bucket (LIVE_TURNS_PER_MINUTE, at most 5 at once). */
export function turnLimiter(config: Runtime['config']): (accountId: string) => boolean {
  const turnBuckets = new Map<string, { tokens: number; at: number }>();
  const bucketSize = Math.min(5, config.LIVE_TURNS_PER_MINUTE);
  return (accountId: string): boolean => {
    const now = Date.now();
    const b = turnBuckets.get(accountId) ?? { tokens: bucketSize, at: now };
    b.tokens = Math.min(bucketSize, b.tokens + ((now - b.at) * config.LIVE_TURNS_PER_MINUTE) / 60_000);
    b.at = now;
    if (turnBuckets.size > 10_000) for (const [k, v] of turnBuckets) if (v.tokens >= bucketSize) turnBuckets.delete(k);
    turnBuckets.set(accountId, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };
}
