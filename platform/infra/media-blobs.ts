import { createMediaBlobRows } from './media-blobs.repository';
import type { Store } from './mongo';
import { hmacSign, signatureMatches } from './signing';

/**
 * Files and generated media in GridFS (one bucket in the service database, behind
 * platform/infra/media-blobs.repository.ts), so every process on every machine reads what any
 * other wrote. Public links are absolute and signed: HMAC-SHA256(secret, "<id>.<exp>"), checked in
 * constant time.
 */
export function createBlobStore(
  store: Store,
  opts: { secret: string; publicBaseUrl: string; defaultTtlSeconds: number },
) {
  const rows = createMediaBlobRows(store);
  const sign = (id: string, exp: number) => hmacSign(opts.secret, `${id}.${exp}`);

  return {
    put: rows.put,
    putStream: rows.putStream,
    info: rows.info,
    open: rows.open,
    read: rows.read,

    /** Absolute public URL valid for `ttlSeconds`. */
    url(id: string, filename: string, ttlSeconds = opts.defaultTtlSeconds): string {
      const exp = Math.floor(Date.now() / 1000) + ttlSeconds;
      return `${opts.publicBaseUrl}/api/v1/assets/${id}/${encodeURIComponent(filename)}?exp=${exp}&sig=${sign(id, exp)}`;
    },

    verify(id: string, exp: string | undefined, sig: string | undefined): 'ok' | 'expired' | 'bad' {
      if (!exp || !sig || !/^\d+$/.test(exp)) return 'bad';
      if (!signatureMatches(sign(id, Number(exp)), sig)) return 'bad';
      return Number(exp) < Date.now() / 1000 ? 'expired' : 'ok';
    },
  };
}
export type BlobStore = ReturnType<typeof createBlobStore>;
