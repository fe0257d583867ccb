import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GridFSBucket } from 'mongodb';
import { newId } from './ids';
import { COLLECTIONS, type Store, openStore } from './mongo';

export interface BlobInfo {
  id: string;
  length: number;
  contentType: string;
  filename: string;
  accountId: string;
}

/**
 * The bytes of files and generated media: one GridFS bucket in the service database (its
 * `.files` and `.chunks` collections), read and written only here. Blobs are found by their global
 * id (a signed public link names it), so the store is not one account's: the owning account is
 * recorded in each blob's metadata.
 */
export function createMediaBlobRows(store: Store) {
  const bucket = new GridFSBucket(openStore(store).db, { bucketName: COLLECTIONS.blobBucket });

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
  };
}
