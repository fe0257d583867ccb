import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GridFSBucket } from 'mongodb';
import { newId } from '../infra/ids';
import { COLLECTIONS, type Database, type Store, openStore } from '../infra/mongo';

/**
 * Drive bytes in the GridFS bucket `drive_blobs` (drive_blobs.files + drive_blobs.chunks).
 * Internal: no blob id, bucket or chunk ever reaches a response. Every helper takes the blob id
 * stored on the DriveFileDoc (`blobId`).
 */
const buckets = new WeakMap<Database, GridFSBucket>();
export function driveBucket(store: Store): GridFSBucket {
  const db = openStore(store);
  let b = buckets.get(db);
  if (!b) {
    b = new GridFSBucket(db.db, { bucketName: COLLECTIONS.driveBlobBucket });
    buckets.set(db, b);
  }
  return b;
}

/** The chunks and files collections of the bucket (the purge deletes through them). */
export const driveBlobCollections = (store: Store) => collectionsOf(openStore(store));
const collectionsOf = (db: Database) => ({
  files: db.db.collection<{ _id: string; length: number }>(`${COLLECTIONS.driveBlobBucket}.files`),
  chunks: db.db.collection<{ _id: unknown; files_id: string; n: number }>(`${COLLECTIONS.driveBlobBucket}.chunks`),
});

export interface StoredDriveBlob {
  blobId: string;
  length: number;
  /** sha256 of the bytes, hex. */
  sha256: string;
}

/**
 * Store bytes as one GridFS file, streamed in 255 KiB chunks: a Buffer is written as it is (no
 * copy), a Readable is piped through a hash. `blobId` lets the caller record the id before the
 * bytes exist (so a crash leaves a findable blob); a new `dbb_…` id otherwise. On a failure the
 * chunks already written are removed before the error is thrown.
 */
export async function putDriveBlob(
  store: Store,
  data: Buffer | Readable,
  meta: { accountId: string; contentType: string; filename: string; fileId?: string; blobId?: string },
): Promise<StoredDriveBlob> {
  const blobId = meta.blobId ?? newId('dbb');
  const up = driveBucket(store).openUploadStreamWithId(blobId as never, meta.filename, {
    metadata: { accountId: meta.accountId, contentType: meta.contentType, fileId: meta.fileId ?? null },
  });
  const hash = createHash('sha256');
  try {
    if (Buffer.isBuffer(data)) {
      hash.update(data);
      await pipeline(Readable.from([data], { objectMode: false }), up);
    } else {
      const tap = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          hash.update(chunk);
          cb(null, chunk);
        },
      });
      await pipeline(data, tap, up);
    }
  } catch (err) {
    await deleteDriveBlob(store, blobId).catch(() => {});
    throw err;
  }
  return { blobId, length: up.length, sha256: hash.digest('hex') };
}

/** Bytes [start, end] inclusive of a blob, or all of them. */
export function openDriveBlob(store: Store, blobId: string, range?: { start: number; end: number }): Readable {
  return driveBucket(store).openDownloadStream(
    blobId as never,
    range ? { start: range.start, end: range.end + 1 } : undefined,
  );
}

/**
 * Delete a blob: its chunks first, then its files document, so a crash between the two leaves a
 * files document without chunks (found again by the next attempt), never chunks without a files
 * document. Safe to repeat: a blob already gone deletes nothing.
 */
export async function deleteDriveBlob(store: Store, blobId: string): Promise<{ chunks: number; file: boolean }> {
  const db = openStore(store);
  const c = collectionsOf(db);
  const chunks = await c.chunks.deleteMany({ files_id: blobId });
  const file = await c.files.deleteOne({ _id: blobId });
  return { chunks: chunks.deletedCount, file: file.deletedCount === 1 };
}
