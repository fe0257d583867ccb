import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GridFSBucket } from 'mongodb';
import { newId } from './ids';
import { COLLECTIONS, type Store, openStore } from './mongo';
import { hmacSign, signatureMatches } from './signing';

export interface BlobInfo {
  id: string;
  length: number;
  contentType: string;
  filename: string;
  accountId: string;
}

/**
 * Files and generated media in GridFS (one bucket in the service database), so every process on
 * every machine reads what any other wrote. Public links are absolute and signed:
 * HMAC-SHA256(secret, "<id>.<exp>"), checked in constant time.
 */
export function createBlobStore(
  store: Store,
  opts: { secret: string; publicBaseUrl: string; defaultTtlSeconds: number },
) {
  const db = openStore(store);
  const bucket = new GridFSBucket(db.db, { bucketName: COLLECTIONS.blobBucket });
  const sign = (id: string, exp: number) => hmacSign(opts.secret, `${id}.${exp}`);

  return {
    async put(data: Buffer, meta: { contentType: string; filename: string; accountId: string }): Promise<BlobInfo> {
      const id = newId('blob');
      await new Promise<void>((resolve, reject) => {
        const up = bucket.openUploadStreamWithId(id as never, meta.filename, {
          metadata: { contentType: meta.contentType, accountId: meta.accountId },
        });
        up.once('finish', () => resolve());
        up.once('error', reject);
        up.end(data);
      });
      return { id, length: data.length, ...meta };
    },

    /** Upload from a stream (large media: never the whole file in memory). */
    async putStream(
      data: Readable,
      meta: { contentType: string; filename: string; accountId: string },
    ): Promise<BlobInfo> {
      const id = newId('blob');
      const up = bucket.openUploadStreamWithId(id as never, meta.filename, {
        metadata: { contentType: meta.contentType, accountId: meta.accountId },
      });
      await pipeline(data, up);
      return { id, length: up.length, ...meta };
    },

    async info(id: string): Promise<BlobInfo | null> {
      const f = await bucket
        .find({ _id: id as never })
        .limit(1)
        .next();
      if (!f) return null;
      const md = (f.metadata ?? {}) as { contentType?: string; accountId?: string };
      return {
        id,
        length: f.length,
        contentType: md.contentType ?? 'application/octet-stream',
        filename: f.filename,
        accountId: md.accountId ?? '',
      };
    },

    /** Bytes [start, end] inclusive, or the whole file. */
    open(id: string, range?: { start: number; end: number }): Readable {
      return bucket.openDownloadStream(id as never, range ? { start: range.start, end: range.end + 1 } : undefined);
    },

    async read(id: string): Promise<Buffer> {
      const chunks: Buffer[] = [];
      for await (const c of bucket.openDownloadStream(id as never)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    },

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
