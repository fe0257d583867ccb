import { z } from 'zod';
import { JOB_EVENT_NAME, JOB_TYPES, type JobType } from './registry';

/**
 * The one registry of webhook event names (SPEC 6.1). It validates subscriptions, types
 * `emitEvent`, and generates the OpenAPI enum, so the three cannot drift (SPEC 9).
 *
 * WARNING: event names are public contract and persisted in webhook subscriptions. Add names;
 * never rename or remove one.
 *
 * `emitted` says whether this build actually sends the event. A subscription to a name that is
 * not emitted yet is refused with 400 (SPEC 6.1, SPEC 9 last rule). When a feature starts
 * emitting a name, flip its flag here, in the same change.
 */

/** Payload schema version, sent as `eventVersion` and `X-Service-Event-Version` (SPEC 6.2, 9). WARNING: public contract. */
export const EVENT_VERSION = '2026-11-01';

/**
 * Job events (SPEC 6.1 api_jobs): one flag per job type covers `<name>.completed` and
 * `<name>.failed`. platform/jobs/outbox.ts publishes them when a job of that type finishes, so a type
 * is true exactly when its pool has an engine (workers/pools.ts); a test checks the two agree.
 */
export const JOB_EVENTS_EMITTED = {
  video: true,
  song: true,
  code: true, // code_build.*
  research: true,
  space: true,
  deck: true, // presentation.*
} as const satisfies Record<JobType, boolean>;

/** Non-job events (SPEC 6.1), by group. Each is emitted through platform/events/events.ts `emitEvent`. */
const OTHER_EVENTS = {
  'project.created': {
    group: 'projects',
    emitted: true,
    description:
      'A project of any kind was created (POST /flowcharts, /whiteboards, /notes, /presentations, /templates/{id}/use, and every other way a project is made). data: projectId, kind, projectType, name, openUrl (absolute).',
  },
  'project.updated': {
    group: 'projects',
    emitted: true,
    description:
      "PATCH /projects/{id} changed a project, or a commit merged into a sheet's grid (POST /sheets/{id}/ops, /edit, a merged proposal, a rollback). data: projectId, kind, projectType, changedFields (names of the fields the PATCH set: name, description, tags, isStarred, content; ['content'] for a sheet commit), version (after the change: the project's, or for a sheet commit the sheet's), commitId (sheet commits only).",
  },
  'project.shared': {
    group: 'projects',
    emitted: true,
    description:
      'POST /projects/{id}/share shared a project with a person or changed their role. data: projectId, kind, projectType, email, role, previousRole (null when newly shared), version (after the change).',
  },
  'project.deleted': {
    group: 'projects',
    emitted: true,
    description: 'DELETE /projects/{id} deleted a project. data: projectId, kind, projectType, name.',
  },
  'notes_movie.completed': { group: 'projects', emitted: false, description: 'A video render of notes finished.' },
  'notes_movie.failed': { group: 'projects', emitted: false, description: 'A video render of notes failed.' },
  'team.member_added': { group: 'teams', emitted: false, description: 'A user was added to an organization.' },
  'team.member_removed': { group: 'teams', emitted: false, description: 'A user was removed from an organization.' },
  'export.completed': { group: 'exports', emitted: false, description: 'A file export finished.' },
  'meeting.completed': { group: 'meetings', emitted: false, description: 'A recording was transcribed and processed.' },
  'code_canvas.iteration_complete': {
    group: 'code_canvas',
    emitted: false,
    description: 'A background iteration finished.',
  },
  'code_canvas.iteration_failed': {
    group: 'code_canvas',
    emitted: false,
    description: 'A background iteration failed or timed out.',
  },
  'code_canvas.published': {
    group: 'code_canvas',
    emitted: false,
    description: 'A code canvas was published to a public URL.',
  },
  'podcast.completed': { group: 'podcasts', emitted: false, description: 'A podcast episode finished.' },
  'podcast.failed': { group: 'podcasts', emitted: false, description: 'A podcast episode failed after retries.' },
  'skill.installed': { group: 'skills', emitted: false, description: 'A skill was installed.' },
  'evi.run_completed': {
    group: 'flows',
    emitted: true,
    description:
      'An agent run completed (flows of the editor use the same name). data: runId, agentId, threadId, status (completed), resultUrl (absolute), creditsUsed, error (null).',
  },
  'evi.run_failed': {
    group: 'flows',
    emitted: true,
    description:
      'An agent run failed (flows of the editor use the same name). data: runId, agentId, threadId, status (failed), resultUrl (absolute), creditsUsed (after the refund of the run fee), error.',
  },
  'email.received': { group: 'business', emitted: false, description: "A message arrived in an agent's own inbox." },
  'form.submitted': { group: 'business', emitted: false, description: 'A form was submitted.' },
} as const;

export type JobEventName = `${(typeof JOB_EVENT_NAME)[JobType]}.${'completed' | 'failed'}`;
export type EventName = keyof typeof OTHER_EVENTS | JobEventName;

export interface EventInfo {
  group: string;
  /** True when this build sends the event; only emitted names may be subscribed to. */
  emitted: boolean;
  description: string;
  /** The job type for api_jobs events. */
  jobType?: JobType;
}

const jobEvents = Object.fromEntries(
  JOB_TYPES.flatMap((type) =>
    (['completed', 'failed'] as const).map((outcome) => [
      `${JOB_EVENT_NAME[type]}.${outcome}`,
      {
        group: 'api_jobs',
        emitted: JOB_EVENTS_EMITTED[type],
        jobType: type,
        description: `A ${type} job ${outcome === 'completed' ? 'completed' : 'failed'}; data has jobId, status, pollUrl (absolute)${outcome === 'failed' ? ' and error' : ''}.`,
      } satisfies EventInfo,
    ]),
  ),
) as Record<JobEventName, EventInfo>;

/** Every accepted event name with its group and emission status (SPEC 6.1, exactly). */
export const EVENTS: Readonly<Record<EventName, EventInfo>> = Object.freeze({ ...OTHER_EVENTS, ...jobEvents });

/** Every name SPEC 6.1 lists. */
export const EVENT_NAMES = Object.keys(EVENTS) as EventName[];

/** Names a webhook may subscribe to now: listed and emitted. */
export const SUBSCRIBABLE_EVENT_NAMES = EVENT_NAMES.filter((n) => EVENTS[n].emitted);

/** Listed by SPEC 6.1 as upcoming and not accepted. */
export const UPCOMING_EVENT_NAMES = ['comment.created', 'template.published', 'sheet.row_added'] as const;

export const isEventName = (n: string): n is EventName => Object.hasOwn(EVENTS, n);

/**
 * Why some names cannot be subscribed to, or null when all can. Names every bad name, grouped
 * by reason: "unknown event name(s): a, b; upcoming and not accepted yet: comment.created;
 * not emitted yet by this service: video.completed".
 */
export function subscriptionProblem(names: readonly string[]): string | null {
  const unknown: string[] = [];
  const upcoming: string[] = [];
  const notEmitted: string[] = [];
  for (const n of new Set(names)) {
    if ((UPCOMING_EVENT_NAMES as readonly string[]).includes(n)) upcoming.push(n);
    else if (!isEventName(n)) unknown.push(n);
    else if (!EVENTS[n].emitted) notEmitted.push(n);
  }
  const parts = [
    unknown.length ? `unknown event name(s): ${unknown.join(', ')}` : '',
    upcoming.length ? `upcoming and not accepted yet: ${upcoming.join(', ')}` : '',
    notEmitted.length ? `not emitted yet by this service: ${notEmitted.join(', ')}` : '',
  ].filter(Boolean);
  return parts.length ? parts.join('; ') : null;
}

/** A subscribable event name; the enum in /openapi is generated from the registry. */
export const SubscribableEventName = z.string({ error: 'must be a string' }).meta({
  id: 'EventName',
  enum: SUBSCRIBABLE_EVENT_NAMES,
  description: `An event name a webhook may subscribe to (SPEC 6.1 names that this service emits). Upcoming names (${UPCOMING_EVENT_NAMES.join(', ')}) and names not emitted yet answer 400.`,
});

/**
 * The event as published on the events exchange (routing key = event name) by platform/jobs/outbox.ts
 * and platform/events/events.ts. WARNING: read by webhook workers of other versions; add fields only.
 */
export const BusEvent = z.object({
  eventId: z.string().min(1),
  event: z.string().min(1),
  accountId: z.string().min(1),
  occurredAt: z.string().min(1),
  data: z.record(z.string(), z.unknown()),
});
export type BusEvent = z.infer<typeof BusEvent>;
