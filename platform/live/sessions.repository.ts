import type { LiveClientTool, TurnDetection } from '../../contracts/live';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';

export type LiveSessionStatus = 'issued' | 'connected' | 'dropped' | 'ended';

export interface LiveHistoryEntry {
  role: 'user' | 'assistant';
  content: string;
  at: Date;
}

/** A server tool the session ran (or a client tool it asked for), as persona `tool_call` events list them. */
export interface LiveToolCallEntry {
  name: string;
  callId: string;
  /** The artifact's type and title (`error` when it failed). */
  type: string;
  title: string;
  ok: boolean;
  at: Date;
}

/**
 * Who speaks in a persona conversation: a published version, copied into the session row when it
 * opens, so a later publish never changes a conversation under way.
 */
export interface LivePersonaProfile {
  personaId: string;
  version: number;
  name: string;
  instructions: string;
  greeting: string;
  /** The persona's tools (chat catalogue names); the session offers the live actions they map to. */
  tools: string[];
}

/** Which connection carries a session: the API process (instance) and its connection id. */
export interface LiveSessionOwner {
  instance: string;
  conn: string;
}

export interface LiveSessionDoc {
  _id: string;
  accountId: string;
  /** The key that opened it: its scopes bound the session's tools (checked again on connect). */
  keyId: string;
  /** `robot`, or `persona:<personaId>@<version>` for a persona conversation. */
  persona: string;
  /** The persona version that speaks (null for `robot`). */
  profile?: LivePersonaProfile | null;
  /** Set once the persona's greeting was spoken (the first connect only). */
  greeted?: boolean;
  /** A web deployment's allowed origins: the WebSocket upgrade's Origin must be one of them (null: any). */
  allowedOrigins?: string[] | null;
  /** The tool calls of the session, oldest first (the last LIVE_TOOL_CALLS_MAX). */
  toolCalls?: LiveToolCallEntry[];
  /** The connection carrying it now; a newer connect replaces it, and the older one closes (4409). */
  owner?: LiveSessionOwner | null;
  /** Updated every LIVE_HEARTBEAT_MS while connected; the scheduler marks a silent session dropped. */
  lastSeenAt?: Date | null;
  voice: string;
  deviceName: string | null;
  ambient: boolean;
  tools: string[];
  clientTools: LiveClientTool[];
  turnDetection: TurnDetection;
  status: LiveSessionStatus;
  /** The one token that may connect next (single use: cleared when it connects). */
  tokenId: string | null;
  tokenExpiresAt: Date | null;
  /** Generation of the newest resumption handle; only a handle of this generation resumes. */
  handleGen: number;
  handleExpiresAt: Date | null;
  /** The conversation so far (the last LIVE_HISTORY_MAX entries), what a resumed session continues. */
  history: LiveHistoryEntry[];
  /** `millicredits`: integer millicredits (`amount`, decimal credits, before; migrated at startup). */
  charge: { operation: 'live_session'; millicredits: number; holdId: string | null; capturedAt: Date | null };
  /** Millicredits the session cost so far: its charge plus what its server tools kept (live_action and media prices); `spent` (decimal credits) before, migrated at startup. */
  spentMillicredits?: number;
  connections: number;
  /** User turns answered so far (LIVE_SESSION_MAX_TURNS bounds them). */
  turns?: number;
  /** Why it ended, when the realtime engine ended it (`limit`: LIVE_SESSION_MAX_MS or LIVE_SESSION_MAX_TURNS). */
  endedReason?: 'limit' | null;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
}

/**
 * The live sessions collection, typed. The sessions service (platform/live/sessions.ts) is its
 * only user: every session move there is one conditional update whose filter is the story.
 */
export const liveSessionsCollection = (store: Store) =>
  openStore(store).db.collection<LiveSessionDoc>(COLLECTIONS.liveSessions);
