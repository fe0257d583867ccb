import type { ResearchDriveAccess } from '../../contracts/research';
import type { BlobStore } from '../../platform/infra/media-blobs';
import { createDriveRepository } from '../../platform/drive/drive.repository';
import { findDriveTextsForResearch } from '../../platform/drive/text';
import type { Store } from '../../platform/infra/mongo';
import type { createJobs } from '../../platform/jobs/jobs';
import { createProjects } from '../../platform/projects/projects.repository';
import { hits, queryTerms } from '../engines/research/research.engine';
import { createWorkspaceRepository } from './workspace.repository';

/**
 * The account's own workspace as a research corpus. Every query carries the account id.
 * Searched: finished jobs (prompts, styles, queries, names and their results: code-build apps
 * and plans, song lyrics, deck outlines, earlier reports), projects, and, when those collections
 * exist in this deployment, notes and Drive files. A hit is "read" by loading its full text,
 * including text files it stored in the blob store; a file that is gone is a failed read.
 * Drive files are found and read through platform/drive/text.ts (the Drive search index and the
 * stored extracted text), never by scanning the Drive collections: the personal drive only, and
 * only what the dispatching key could read (`drive`: null = no Drive; pins = those folders only).
 */
export interface Candidate {
  kind: string;
  id: string;
  title: string;
  path: string;
  /** Text the search matched on. */
  searchable: string;
  score: number;
  createdAt: number;
  /** Load the full text; throws when the source cannot be read. */
  read(): Promise<string>;
}

/** Optional collections other features own; searched only when present. */
const TEXT_COLLECTIONS = [{ name: 'notes', kind: 'Note', path: (id: string) => `/api/v1/projects/${id}` }] as const;

const SCAN_LIMIT = 300;
/** Drive files taken as candidates at most, and the characters of extracted text read from each. */
const DRIVE_CANDIDATES = 50;
const DRIVE_READ_CHARS = 20_000;

/** Every string inside a value, flattened (URLs and ids left out: they are not prose). */
export function strings(v: unknown, out: string[] = [], depth = 0): string[] {
  if (depth > 6 || v == null) return out;
  if (typeof v === 'string') {
    if (!/^https?:\/\//.test(v) && !/^[a-z]+_[0-9a-z]{20}$/.test(v) && !/^[0-9a-f]{64}$/.test(v)) out.push(v);
  } else if (Array.isArray(v)) for (const x of v) strings(x, out, depth + 1);
  else if (typeof v === 'object' && !(v instanceof Date))
    for (const x of Object.values(v as Record<string, unknown>)) strings(x, out, depth + 1);
  return out;
}

const TEXT_MIME = /^(text\/|application\/(json|javascript|xml|markdown))/;
const blobIdOf = (url: string) => /\/assets\/(blob_[0-9a-z]+)\//.exec(url)?.[1];

const firstString = (...xs: unknown[]) => xs.find((x): x is string => typeof x === 'string' && x.trim().length > 0);

// Length: its one method, search (134 lines), searches each collection in turn into one ranked candidate
// list.
export function createWorkspace(deps: {
  store: Store;
  blobs: BlobStore;
  jobs: Pick<ReturnType<typeof createJobs>, 'forAccount'>;
}) {
  const { store, blobs, jobs: jobsRepo } = deps;
  const projectsRepo = createProjects(store);
  const drives = createDriveRepository(store);
  const optional = createWorkspaceRepository(store);

  return {
    /**
     * Search each collection for the query terms. Returns the candidates (best first) and how
     * many collection searches ran.
     */
    async search(
      accountId: string,
      query: string,
      opts: {
        excludeJobId: string;
        drive: ResearchDriveAccess | null;
        signal: AbortSignal;
        onSearch?: (what: string) => Promise<void>;
      },
    ): Promise<{ candidates: Candidate[]; searchCount: number }> {
      const terms = queryTerms(query);
      const candidates: Candidate[] = [];
      let searchCount = 0;
      const score = (title: string, body: string) => (terms.length ? hits(title, terms) * 3 + hits(body, terms) : 0);

      await opts.onSearch?.('jobs');
      searchCount++;
      const jobs = await jobsRepo
        .forAccount(accountId)
        .recentComplete({ excludeJobId: opts.excludeJobId, limit: SCAN_LIMIT });
      for (const j of jobs) {
        const input = (j.input ?? {}) as Record<string, unknown>;
        const result = (j.result ?? {}) as Record<string, unknown>;
        const title =
          firstString(result.title, result.name, input.title, input.name, input.query, input.prompt, input.style) ??
          j._id;
        const body = [...strings(input), ...strings(result)].join('\n');
        const s = score(title, body);
        if (s <= 0) continue;
        candidates.push({
          kind: `${j.type} job ${j._id}`,
          id: j._id,
          title: title.slice(0, 120),
          path: `/api/v1/jobs/${j._id}`,
          searchable: body,
          score: s,
          createdAt: j.createdAt.getTime(),
          async read() {
            const parts = [body];
            const files = Array.isArray(result.files)
              ? (result.files as { url?: string; mimeType?: string; path?: string }[])
              : [];
            for (const f of files) {
              if (!f.url || !TEXT_MIME.test(f.mimeType ?? '')) continue;
              const blobId = blobIdOf(f.url);
              const info = blobId ? await blobs.info(blobId) : null;
              if (!blobId || !info) throw new Error(`its file ${f.path ?? 'output'} is no longer stored`);
              parts.push((await blobs.read(blobId)).toString('utf8'));
            }
            return parts.join('\n\n');
          },
        });
      }
      if (opts.signal.aborted) throw opts.signal.reason;

      await opts.onSearch?.('projects');
      searchCount++;
      const projects = await projectsRepo.forAccount(accountId).recent(SCAN_LIMIT);
      for (const p of projects) {
        const doc = p as unknown as Record<string, unknown>;
        const title = firstString(doc.name, doc.title) ?? String(doc._id);
        const { _id, accountId: _a, ...rest } = doc;
        const body = strings(rest).join('\n');
        const s = score(title, body);
        if (s <= 0) continue;
        candidates.push({
          kind: `${String(doc.projectType ?? 'project')} project ${String(_id)}`,
          id: String(_id),
          title: title.slice(0, 120),
          path: `/api/v1/projects/${String(_id)}`,
          searchable: body,
          score: s,
          createdAt: doc.createdAt instanceof Date ? doc.createdAt.getTime() : 0,
          read: async () => `${title}\n${body}`,
        });
      }

      const present = await optional.present();
      for (const c of TEXT_COLLECTIONS) {
        if (!present.has(c.name)) continue;
        await opts.onSearch?.(c.name);
        searchCount++;
        const docs = await optional.forAccount(accountId).textDocs(c.name, SCAN_LIMIT);
        for (const d of docs) {
          const doc = d as Record<string, unknown>;
          if (doc.trashedAt || doc.deletedAt) continue;
          const title = firstString(doc.name, doc.title) ?? String(doc._id);
          const body = [firstString(doc.description) ?? '', firstString(doc.content, doc.text, doc.body) ?? ''].join(
            '\n',
          );
          const s = score(title, body);
          if (s <= 0) continue;
          candidates.push({
            kind: `${c.kind} ${String(doc._id)}`,
            id: String(doc._id),
            title: title.slice(0, 120),
            path: c.path(String(doc._id)),
            searchable: body,
            score: s,
            createdAt: doc.createdAt instanceof Date ? doc.createdAt.getTime() : 0,
            read: async () => `${title}\n${body}`,
          });
        }
      }
      // The Drive is searched when the key may read it and the account has files there: its storage meter (one read by _id).
      const drive = terms.length && opts.drive ? await drives.usageOf(accountId) : null;
      if ((drive?.fileCount ?? 0) > 0) {
        await opts.onSearch?.('drive_files');
        searchCount++;
        const found = await findDriveTextsForResearch(store, accountId, terms.join(' '), {
          limit: DRIVE_CANDIDATES,
          maxChars: DRIVE_READ_CHARS,
          pins: opts.drive!.pins,
        });
        for (const d of found) {
          const title = d.file.name;
          // Same scale as the other sources: title hits count three times; each query word in the extracted text once.
          const s =
            hits(title, terms) * 3 + hits([d.file.tags.join(' '), d.file.description].join('\n'), terms) + d.textTerms;
          if (s <= 0) continue;
          candidates.push({
            kind: `Drive file ${d.file._id}`,
            id: d.file._id,
            title: title.slice(0, 120),
            path: `/api/v1/drive/files/${d.file._id}`,
            searchable: [title, d.file.description].join('\n'),
            score: s,
            createdAt: d.file.createdAt.getTime(),
            read: d.read,
          });
        }
      }
      if (opts.signal.aborted) throw opts.signal.reason;
      candidates.sort((a, b) => b.score - a.score || b.createdAt - a.createdAt || a.id.localeCompare(b.id));
      return { candidates, searchCount };
    },
  };
}
