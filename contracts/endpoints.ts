import type { z } from 'zod';
import { AccountResponse, CreditsResponse } from './account';
import {
  AGENT_COMPLETION_STREAM_DESCRIPTION,
  AgentCompletionRequest,
  AgentCompletionResponse,
  AgentMessageAccepted,
  AgentMessageRequest,
  AgentRunApproveAccepted,
  AgentRunApproveRequest,
  AgentRunList,
  AgentRunListQuery,
  AgentRunRequest,
  AgentRunResult,
  AgentRunView,
  AgentUsage,
  AgentUsageQuery,
} from './agents';
import {
  Board,
  BoardCreate,
  BoardDuplicate,
  BoardList,
  BoardListQuery,
  BoardUpdate,
  Card,
  CardCreate,
  CardList,
  CardListQuery,
  CardUpdate,
} from './boards';
import { CHAT_STREAM_DESCRIPTION, ChatJsonResponse, ChatRequest } from './chat';
import { CodeBuildRequest } from './code-builds';
import {
  DriveBulkRequest,
  DriveBulkResult,
  DriveFile,
  DriveFileCreate,
  DriveFileHandle,
  DriveFileList,
  DriveFileListQuery,
  DriveFileUpdate,
  DriveFolder,
  DriveFolderCreate,
  DriveFolderListQuery,
  DriveFolderTree,
  DriveFolderUpdate,
} from './drive';
import { ExtractFlowchartRequest, ExtractFlowchartResult } from './extract';
import {
  Conversation,
  ConversationCreate,
  ConversationList,
  ConversationListQuery,
  ConversationUpdate,
  MessageList,
  MessageListQuery,
} from './conversations';
import { ImageRequest, ImageResult, MoonlightRequest, MoonlightResult } from './images';
import { PresentationCreated, PresentationRequest } from './presentations';
import {
  Persona,
  PersonaConversation,
  PersonaConversationStart,
  PersonaCreate,
  PersonaDeployment,
  PersonaDeploymentCreate,
  PersonaDeploymentList,
  PersonaDeploymentListQuery,
  PersonaEventList,
  PersonaEventListQuery,
  PersonaFaceList,
  PersonaList,
  PersonaListQuery,
  PersonaUpdate,
} from './personas';
import {
  FlowchartCreate,
  NotesCreate,
  Project,
  ProjectList,
  ProjectListQuery,
  ProjectShareRequest,
  ProjectUpdate,
  WhiteboardCreate,
} from './projects';
import { TemplateList, TemplateListQuery, TemplateUse } from './templates';
import { ResearchLegacy, ResearchRequest } from './research';
import {
  CommitListQuery,
  CommitResolveRequest,
  Sheet,
  SheetChange,
  SheetRange,
  SheetCommit,
  SheetCommitList,
  SheetCreate,
  SheetEditRequest,
  SheetEditResult,
  SheetList,
  SheetListQuery,
  SheetOpsRequest,
  SheetRangeQuery,
  SheetReadQuery,
  SheetRollbackRequest,
} from './sheets';
import { SongRequest } from './songs';
import { LiveActionRequest, LiveActionResponse, LiveSessionRequest, LiveSessionResponse } from './live';
import { SPEECH_AUDIO, SPEECH_MEDIA_TYPE, SpeechRequest, VoiceList } from './speech';
import { DRIVE_DOWNLOAD_RULES, DriveDownloadLink } from './drive-downloads';
import { DriveFileText, DriveSearchQuery, DriveSearchResult } from './drive';
import {
  Webhook,
  WebhookCreate,
  WebhookCreated,
  WebhookDeliveriesQuery,
  WebhookDeliveryList,
  WebhookList,
  WebhookUpdate,
} from './webhooks';
import { JobAccepted, JobEnvelope, OpenApiDocument, WholeListQuery } from './common';
import type { Scope } from './registry';
import { VideoAccepted, VideoRequest } from './videos';
import { SpaceAccepted, SpaceRequest } from './spaces';

/**
 * Every endpoint of SPEC section 4, in one catalogue. The API mounts its routes from these
 * entries (method, path, scope, success status, body schema) and the OpenAPI document is
 * generated from the same entries, so the two cannot drift.
 *
 * `update` operations whose method SPEC leaves open use PATCH, like the webhook update.
 */
export interface Endpoint {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Path relative to /api/v1, with {param} placeholders. */
  path: string;
  /** Any one of these scopes suffices ("read or ai"). Empty: no key needed. */
  scopes: readonly Scope[];
  status: 200 | 201 | 202 | 204 | 302;
  summary: string;
  tag: string;
  body?: z.ZodType;
  query?: z.ZodType;
  response?: z.ZodType;
  /** Also answers the SPEC 4 rule 3 Idempotency-Key header. */
  idempotent?: boolean;
  /**
   * Honours `If-Match: "<version>"`: a version that is no longer the stored one answers 412
   * precondition_failed and changes nothing.
   */
  ifMatch?: boolean;
  /**
   * The `Location` of a 201 or 202 answer, under the API base path, from the answer and the path
   * parameters. Without it (api/http/route.ts locationOf): a job envelope's `/jobs/{jobId}`, else
   * the catalogue path one `/{id}` below this one with the answer's `id`.
   */
  location?: (created: Record<string, unknown>, params: Record<string, string>) => string;
  /** Errors particular to this endpoint, by HTTP status (the common ones are added for all). */
  errors?: Record<string, string>;
  /**
   * A streamed success answer besides (or instead of) `response`: its media type, what it carries,
   * and the response headers that come with it.
   */
  stream?: { mediaType: string; description: string; headers?: Record<string, string> };
  /** Request headers the endpoint honours, besides Idempotency-Key and If-Match: name → description. */
  requestHeaders?: Record<string, string>;
  /** Response headers of the success answer (besides Location and the rate-limit ones): name → description. */
  successHeaders?: Record<string, string>;
  /** Answers without a body besides the success one and the errors (204, 304): status → description. */
  emptyAnswers?: Record<string, string>;
}

const e = <T extends Endpoint>(x: T) => x;
const R: readonly Scope[] = ['read'];
const W: readonly Scope[] = ['write'];
const AI: readonly Scope[] = ['ai'];
const R_AI: readonly Scope[] = ['read', 'ai'];
const DR: readonly Scope[] = ['drive:read'];
const DW: readonly Scope[] = ['drive:write'];

export const endpoints = {
  // 4.1 Meta and account
  getOpenapi: e({
    method: 'get',
    path: '/openapi',
    scopes: [],
    status: 200,
    tag: 'meta',
    summary: 'The OpenAPI 3.1 document (no key needed).',
    response: OpenApiDocument,
  }),
  getAccount: e({
    method: 'get',
    path: '/account',
    scopes: R,
    status: 200,
    tag: 'account',
    summary: 'Authenticated account (whoami).',
    response: AccountResponse,
  }),
  getCredits: e({
    method: 'get',
    path: '/account/credits',
    scopes: R,
    status: 200,
    tag: 'account',
    summary: 'Plan and AI credit balance.',
    response: CreditsResponse,
  }),

  // 4.2 Personas
  listPersonas: e({
    method: 'get',
    path: '/personas',
    scopes: R,
    status: 200,
    tag: 'personas',
    summary: 'List personas, newest first (list envelope; filter status).',
    query: PersonaListQuery,
    response: PersonaList,
  }),
  createPersona: e({
    method: 'post',
    path: '/personas',
    scopes: W,
    status: 201,
    tag: 'personas',
    summary:
      'Create a persona (status draft): name, instructions, voice, faceId, greeting, tools, description. Only name is required to create; publish needs the rest.',
    body: PersonaCreate,
    response: Persona,
  }),
  getPersona: e({
    method: 'get',
    path: '/personas/{id}',
    scopes: R,
    status: 200,
    tag: 'personas',
    summary: 'Get a persona: its working copy and its latest published version.',
    response: Persona,
  }),
  updatePersona: e({
    ifMatch: true,
    method: 'patch',
    path: '/personas/{id}',
    scopes: W,
    status: 200,
    tag: 'personas',
    summary:
      'Update the working copy: only the passed fields change, and the persona becomes a draft; published versions never change. If-Match supported.',
    body: PersonaUpdate,
    response: Persona,
    errors: { '412': 'If-Match names an older version (precondition_failed); nothing was changed.' },
  }),
  deletePersona: e({
    method: 'delete',
    path: '/personas/{id}',
    scopes: W,
    status: 204,
    tag: 'personas',
    summary:
      'Delete a persona with its versions, deployments, conversations and their events; its active conversations are ended (their tokens stop connecting).',
  }),
  publishPersona: e({
    ifMatch: true,
    method: 'post',
    path: '/personas/{id}/publish',
    scopes: W,
    status: 200,
    tag: 'personas',
    summary:
      'Publish: check the working copy (name, instructions, greeting, a known face, voice and tools; else 400 naming each) and freeze it as the next version. Publishing an unchanged persona keeps its version. If-Match supported.',
    response: Persona,
    errors: {
      '409': 'The persona changed while it was being published (version_conflict); a concurrent publish (conflict).',
      '412':
        'If-Match names an older version, or the persona changed while it was being published under If-Match (precondition_failed).',
    },
  }),
  listPersonaDeployments: e({
    method: 'get',
    path: '/personas/{id}/deployments',
    scopes: R,
    status: 200,
    tag: 'personas',
    summary: "List the persona's deployments, newest first (list envelope).",
    query: PersonaDeploymentListQuery,
    response: PersonaDeploymentList,
  }),
  createPersonaDeployment: e({
    location: (_r, p) => `/personas/${p.id}/deployments`,
    method: 'post',
    path: '/personas/{id}/deployments',
    scopes: W,
    status: 201,
    tag: 'personas',
    summary:
      'Put a published version (default the latest) on a channel: web (embed on allowed https origins), voice (the realtime engine) or api; the answer says how to connect.',
    body: PersonaDeploymentCreate,
    response: PersonaDeployment,
    errors: { '409': 'The persona has no published version (persona_not_published).' },
  }),
  startPersonaConversation: e({
    location: (r, p) => `/personas/${p.id}/conversations/${String(r.id)}/events`,
    method: 'post',
    path: '/personas/{id}/conversations',
    scopes: W,
    status: 201,
    tag: 'personas',
    summary:
      "Start a conversation on a deployment: a live session locked to the deployment's persona version (its instructions are the system message, its greeting the first assistant turn, its tools the only server tools offered; a web deployment's token connects only from its allowed origins), charged once (live_session); the answer carries the realtime token. The key needs the ai scope too (else 403).",
    body: PersonaConversationStart,
    response: PersonaConversation,
    idempotent: true,
    errors: { '402': 'The balance cannot cover live_session (insufficient_credits).' },
  }),
  endPersonaConversation: e({
    method: 'post',
    path: '/personas/{id}/conversations/{cid}/end',
    scopes: W,
    status: 200,
    tag: 'personas',
    summary:
      'End a conversation: its live session ends (the token no longer connects), endedAt, durationMs and creditsUsed are recorded. Ending an ended conversation answers the same body.',
    response: PersonaConversation,
  }),
  listPersonaConversationEvents: e({
    method: 'get',
    path: '/personas/{id}/conversations/{cid}/events',
    scopes: R,
    status: 200,
    tag: 'personas',
    summary:
      'What happened in a conversation, oldest first (list envelope): started, user_turn, assistant_turn (the greeting first), tool_call (name, artifact type and title, ok), ended.',
    query: PersonaEventListQuery,
    response: PersonaEventList,
  }),
  listPersonaFaces: e({
    method: 'get',
    path: '/personas/faces',
    scopes: R,
    status: 200,
    tag: 'personas',
    summary:
      'The built-in faces a persona may wear, each with an SVG preview URL served without a key (all in one page unless limit is given).',
    query: WholeListQuery,
    response: PersonaFaceList,
  }),

  // 4.3 Projects and creation
  listProjects: e({
    method: 'get',
    path: '/projects',
    scopes: R,
    status: 200,
    tag: 'projects',
    query: ProjectListQuery,
    response: ProjectList,
    summary:
      'List projects of every kind (flowcharts, whiteboards, notes, presentations, sheets), without their content. Newest change first by default (sort, order); filters projectType, kind, tag, q (case-insensitive part of the name), starred. Keyset pages: limit 1 to 100 (default 20), opaque cursor.',
  }),
  getProject: e({
    method: 'get',
    path: '/projects/{id}',
    scopes: R,
    status: 200,
    tag: 'projects',
    summary: 'Get a project with its content and shares; ETag is its version.',
    response: Project,
  }),
  updateProject: e({
    ifMatch: true,
    method: 'patch',
    path: '/projects/{id}',
    scopes: W,
    status: 200,
    tag: 'projects',
    body: ProjectUpdate,
    response: Project,
    summary:
      "Update a project's metadata or content: only the fields sent change (content is replaced whole, validated for the kind; a presentation's or sheet's content is not patchable). Send If-Match: \"<version>\" to apply only to that version.",
    errors: {
      '412': 'If-Match names a version the project has moved past (precondition_failed); nothing was changed.',
    },
  }),
  deleteProject: e({
    ifMatch: true,
    method: 'delete',
    path: '/projects/{id}',
    scopes: W,
    status: 204,
    tag: 'projects',
    summary:
      "Delete a project (a sheet's grid and commits with it; a presentation's deck job is left as it is). Honours If-Match.",
    errors: {
      '412': 'If-Match names a version the project has moved past (precondition_failed); nothing was deleted.',
    },
  }),
  shareProject: e({
    ifMatch: true,
    method: 'post',
    path: '/projects/{id}/share',
    scopes: W,
    status: 200,
    tag: 'projects',
    body: ProjectShareRequest,
    response: Project,
    summary:
      'Share a project with a person (email) as viewer, commenter or editor; sharing an email again changes its role (no second entry). Answers the project with its shares and emits project.shared. At most 50 people per project. Honours If-Match.',
    errors: {
      '409': 'The project is already shared with 50 people (limit_exceeded).',
      '412': 'If-Match names an older version (precondition_failed).',
    },
  }),
  createFlowchart: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/flowcharts',
    scopes: W,
    status: 201,
    tag: 'projects',
    body: FlowchartCreate,
    response: Project,
    idempotent: true,
    summary:
      'Create a flowchart project: nodes (at most 500; shapes start, end, process, decision, input, output, document, note) and edges (at most 1000) that name existing nodes. Nodes without x and y are laid out top to bottom.',
  }),
  createWhiteboard: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/whiteboards',
    scopes: W,
    status: 201,
    tag: 'projects',
    body: WhiteboardCreate,
    response: Project,
    idempotent: true,
    summary:
      'Create a whiteboard project: at most 1000 elements (shapes, text, images by http(s) URL, connectors between existing elements), each with id, position, size and style.',
  }),
  createNotes: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/notes',
    scopes: W,
    status: 201,
    tag: 'projects',
    body: NotesCreate,
    response: Project,
    idempotent: true,
    summary: 'Create a notes project: Markdown of at most 200000 characters.',
  }),
  createPresentation: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/presentations',
    scopes: W,
    status: 201,
    tag: 'projects',
    summary: 'Create a presentation; slides build in the background as a deck_ job.',
    body: PresentationRequest,
    response: PresentationCreated,
    idempotent: true,
  }),
  listTemplates: e({
    method: 'get',
    path: '/templates',
    scopes: R,
    status: 200,
    tag: 'projects',
    query: TemplateListQuery,
    response: TemplateList,
    summary:
      'List the built-in templates (flowcharts, whiteboards, notes, sheets), each with its content and a preview (counts, first lines, an SVG picture as a data: URL). Filters kind, projectType.',
  }),
  useTemplate: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/templates/{id}/use',
    scopes: W,
    status: 201,
    tag: 'projects',
    body: TemplateUse,
    response: Project,
    idempotent: true,
    summary:
      "Create a project from a template, named from the body's name or the template's (no body or {} takes the template's name, description and tags).",
  }),

  // 4.4 Sheets
  listSheets: e({
    method: 'get',
    path: '/sheets',
    scopes: R,
    status: 200,
    tag: 'sheets',
    summary: 'List sheets, newest first.',
    query: SheetListQuery,
    response: SheetList,
  }),
  createSheet: e({
    method: 'post',
    path: '/sheets',
    scopes: W,
    status: 201,
    tag: 'sheets',
    summary: 'Create a sheet (a project of kind sheet): typed columns and optional initial rows.',
    body: SheetCreate,
    response: Sheet,
  }),
  getSheet: e({
    method: 'get',
    path: '/sheets/{id}',
    scopes: R,
    status: 200,
    tag: 'sheets',
    summary: "Read a sheet's columns and a page of its rows (startRow, rowLimit).",
    query: SheetReadQuery,
    response: Sheet,
  }),
  getSheetRange: e({
    method: 'get',
    path: '/sheets/{id}/range',
    scopes: R,
    status: 200,
    tag: 'sheets',
    summary: 'Read a sheet range in A1 notation (row 1 is the first data row).',
    query: SheetRangeQuery,
    response: SheetRange,
    errors: {
      '400': 'Validation failed, or the range is malformed or starts outside the grid (the message names range).',
    },
  }),
  applySheetOps: e({
    ifMatch: true,
    method: 'post',
    path: '/sheets/{id}/ops',
    scopes: W,
    status: 200,
    tag: 'sheets',
    summary: 'Apply or propose structured ops as one commit.',
    body: SheetOpsRequest,
    response: SheetChange,
    errors: {
      '400': 'Validation failed; the message names the op and field, e.g. ops.2.column.',
      '409': 'Concurrent commits kept changing the sheet / made the ops inapplicable (conflict).',
      '412': 'If-Match named another version (precondition_failed).',
    },
  }),
  editSheet: e({
    ifMatch: true,
    method: 'post',
    path: '/sheets/{id}/edit',
    scopes: AI,
    status: 200,
    tag: 'sheets',
    summary:
      'Edit by natural-language instruction (charged sheet_edit): the engine writes ops, applied or proposed as a commit.',
    body: SheetEditRequest,
    response: SheetEditResult,
    errors: {
      '400':
        'The instruction is not understood (the message lists what is), or the engine wrote ops that do not apply; nothing is charged.',
      '409': 'Concurrent commits (conflict).',
      '412': 'If-Match named another version (precondition_failed); nothing is charged.',
      '503': 'The sheet pool or its provider is unavailable (service_unavailable); nothing is charged.',
      '504': 'The sheet pool did not answer within the deadline (timeout); nothing is charged.',
    },
  }),
  listSheetCommits: e({
    method: 'get',
    path: '/sheets/{id}/commits',
    scopes: R,
    status: 200,
    tag: 'sheets',
    summary: 'List commits, newest first (filter by status).',
    query: CommitListQuery,
    response: SheetCommitList,
  }),
  getSheetCommit: e({
    method: 'get',
    path: '/sheets/{id}/commits/{commitId}',
    scopes: R,
    status: 200,
    tag: 'sheets',
    summary: 'Get a commit with its ops and cell diff.',
    response: SheetCommit,
  }),
  resolveSheetCommit: e({
    ifMatch: true,
    method: 'post',
    path: '/sheets/{id}/commits/{commitId}/resolve',
    scopes: W,
    status: 200,
    tag: 'sheets',
    summary: 'Merge or reject a proposed commit; a merge is rebased onto later commits that touched other cells.',
    body: CommitResolveRequest,
    response: SheetChange,
    errors: {
      '409':
        'A later merged commit changed what the proposal changes or reads (stale_commit), the commit is not proposed (conflict).',
      '412': 'If-Match named another sheet version (precondition_failed).',
    },
  }),
  rollbackSheet: e({
    ifMatch: true,
    method: 'post',
    path: '/sheets/{id}/rollback',
    scopes: W,
    status: 200,
    tag: 'sheets',
    summary: 'Restore the grid of a merged commit, as a new commit.',
    body: SheetRollbackRequest,
    response: SheetChange,
    errors: { '409': 'The commit is not merged, or the grid already equals it (conflict).' },
  }),

  // 4.5 Boards
  listBoards: e({
    method: 'get',
    path: '/boards',
    scopes: R,
    status: 200,
    tag: 'boards',
    summary: 'List boards, last changed first (list envelope; lanes without card counts).',
    query: BoardListQuery,
    response: BoardList,
  }),
  createBoard: e({
    method: 'post',
    path: '/boards',
    scopes: W,
    status: 201,
    tag: 'boards',
    summary: 'Create a board (default lanes To do, Doing, Done).',
    body: BoardCreate,
    response: Board,
  }),
  getBoard: e({
    method: 'get',
    path: '/boards/{id}',
    scopes: R,
    status: 200,
    tag: 'boards',
    summary: 'Get a board with its card counts per lane.',
    response: Board,
  }),
  updateBoard: e({
    ifMatch: true,
    method: 'patch',
    path: '/boards/{id}',
    scopes: W,
    status: 200,
    tag: 'boards',
    summary:
      'Update a board: only the passed fields change; columns replaces the lanes (matched by id). If-Match supported.',
    body: BoardUpdate,
    response: Board,
    errors: {
      '409': 'A removed lane still holds cards (column_not_empty).',
      '412': 'If-Match names an older version (precondition_failed).',
    },
  }),
  deleteBoard: e({
    method: 'delete',
    path: '/boards/{id}',
    scopes: W,
    status: 204,
    tag: 'boards',
    summary: 'Delete a board and its cards.',
  }),
  duplicateBoard: e({
    location: (r) => `/boards/${String(r.id)}`,
    method: 'post',
    path: '/boards/{id}/duplicate',
    scopes: W,
    status: 201,
    tag: 'boards',
    summary:
      'Duplicate a board: a deep copy of its lanes and cards with new ids, in the same order. No body, {} or { name }.',
    body: BoardDuplicate,
    response: Board,
  }),
  listCards: e({
    method: 'get',
    path: '/boards/{id}/cards',
    scopes: R,
    status: 200,
    tag: 'boards',
    summary:
      'List cards in board order: lane by lane, then position, then id (list envelope; filters column, label, assignee).',
    query: CardListQuery,
    response: CardList,
  }),
  createCard: e({
    method: 'post',
    path: '/boards/{id}/cards',
    scopes: W,
    status: 201,
    tag: 'boards',
    summary: 'Create a card, at the bottom of its lane unless before/after say where.',
    body: CardCreate,
    response: Card,
    errors: { '409': 'The lane is being removed from the board (conflict); try again.' },
  }),
  updateCard: e({
    ifMatch: true,
    method: 'patch',
    path: '/boards/{id}/cards/{cardId}',
    scopes: W,
    status: 200,
    tag: 'boards',
    summary:
      'Update a card: only the passed fields change; column, before and after move it (only this card is written). If-Match supported.',
    body: CardUpdate,
    response: Card,
    errors: {
      '409': 'The target lane is being removed (conflict).',
      '412': 'If-Match names an older version (precondition_failed).',
    },
  }),
  deleteCard: e({
    method: 'delete',
    path: '/boards/{id}/cards/{cardId}',
    scopes: W,
    status: 204,
    tag: 'boards',
    summary: 'Delete a card.',
  }),

  // 4.6 Chat and conversations
  chat: e({
    method: 'post',
    path: '/chat',
    scopes: AI,
    status: 200,
    tag: 'chat',
    summary: 'One assistant turn: a UI-message SSE stream, or assembled JSON with stream false.',
    body: ChatRequest,
    response: ChatJsonResponse,
    stream: {
      mediaType: 'text/event-stream',
      description: CHAT_STREAM_DESCRIPTION,
      headers: {
        'X-Conversation-Id':
          'The conversation the turn belongs to (new when the request named none); also on stream false.',
        'x-vercel-ai-ui-message-stream': 'v1 (stream true).',
      },
    },
    errors: {
      '402':
        'The balance cannot cover the turn (insufficient_credits), answered before any stream starts; nothing is stored.',
      '403':
        'The key lacks ai, or names a conversationId without read and write (forbidden: continuing a conversation reads and appends to it), or the plan lacks API access; nothing is stored or charged.',
    },
  }),
  listConversations: e({
    method: 'get',
    path: '/conversations',
    scopes: R,
    status: 200,
    tag: 'chat',
    summary: 'List conversations, newest activity first (list envelope).',
    query: ConversationListQuery,
    response: ConversationList,
  }),
  createConversation: e({
    method: 'post',
    path: '/conversations',
    scopes: W,
    status: 201,
    tag: 'chat',
    summary: 'Create a conversation.',
    body: ConversationCreate,
    response: Conversation,
  }),
  getConversation: e({
    method: 'get',
    path: '/conversations/{id}',
    scopes: R,
    status: 200,
    tag: 'chat',
    summary: 'Get a conversation.',
    response: Conversation,
  }),
  updateConversation: e({
    ifMatch: true,
    method: 'patch',
    path: '/conversations/{id}',
    scopes: W,
    status: 200,
    tag: 'chat',
    summary: 'Update title or mode: only the passed fields change. If-Match supported.',
    body: ConversationUpdate,
    response: Conversation,
    errors: { '412': 'If-Match names an older version (precondition_failed); nothing was changed.' },
  }),
  deleteConversation: e({
    method: 'delete',
    path: '/conversations/{id}',
    scopes: W,
    status: 204,
    tag: 'chat',
    summary: 'Delete the conversation and its messages.',
  }),
  listConversationMessages: e({
    method: 'get',
    path: '/conversations/{id}/messages',
    scopes: R,
    status: 200,
    tag: 'chat',
    summary: 'List messages, oldest first (list envelope, by seq).',
    query: MessageListQuery,
    response: MessageList,
  }),

  // 4.7 Media and jobs
  extractFlowchart: e({
    location: (r) => `/projects/${String(r.id)}`,
    method: 'post',
    path: '/extract-flowchart',
    scopes: AI,
    status: 201,
    tag: 'media',
    summary: 'Create a flowchart project from a PDF, PPTX or image.',
    body: ExtractFlowchartRequest,
    response: ExtractFlowchartResult,
    idempotent: true,
    errors: {
      '400':
        'validation_error naming the field, before any charge: documentBase64 with a data: prefix, not canonical base64, more than 10 MB decoded, or bytes that are not of mimeType (sniffed); mimeType outside the enum; fileName not one line of at most 255 characters. Also invalid_json and bad_request.',
      '422':
        'unreadable_document (the document is damaged or password-protected) or no_text_found (it holds no text); nothing is charged. Or idempotency_key_reused (this Idempotency-Key was used with another body).',
      '503': 'The extract pool is unreachable, or lacks OCR on its machine (service_unavailable); nothing is charged.',
      '504':
        'The extract pool did not answer within the deadline (timeout, EXTRACT_RPC_TIMEOUT_MS); nothing is charged.',
    },
  }),
  createImage: e({
    method: 'post',
    path: '/images',
    scopes: AI,
    status: 200,
    tag: 'media',
    summary: 'Synchronous image generation.',
    body: ImageRequest,
    response: ImageResult,
    errors: {
      '403': 'Explicit svc-ultra on the Free plan (forbidden), or scope/plan.',
      '504': 'The image pool did not answer within the deadline (timeout); nothing is charged.',
    },
  }),
  createMoonlightImage: e({
    method: 'post',
    path: '/images/moonlight',
    scopes: AI,
    status: 200,
    tag: 'media',
    summary: 'Synchronous in-house image model render.',
    body: MoonlightRequest,
    response: MoonlightResult,
    errors: {
      '400': 'Validation failed, a non-empty negativePrompt, or a prompt describing adult content.',
      '403': 'The finished render was scored adult; nothing is charged.',
      '504': 'The image pool did not answer within the deadline (timeout); nothing is charged.',
    },
  }),
  createVideo: e({
    method: 'post',
    path: '/videos',
    scopes: AI,
    status: 202,
    tag: 'media',
    summary: 'Dispatch a video render (vid_ job).',
    body: VideoRequest,
    response: VideoAccepted,
    idempotent: true,
  }),
  createSong: e({
    method: 'post',
    path: '/songs',
    scopes: AI,
    status: 202,
    tag: 'media',
    summary: 'Dispatch a song (song_ job).',
    body: SongRequest,
    response: JobAccepted,
    idempotent: true,
  }),
  createCodeBuild: e({
    method: 'post',
    path: '/code-builds',
    scopes: AI,
    status: 202,
    tag: 'media',
    summary: 'Dispatch a code build (code_ job): a runnable single-page app.',
    body: CodeBuildRequest,
    response: JobAccepted,
    idempotent: true,
  }),
  createSpace: e({
    method: 'post',
    path: '/real-world/spaces',
    scopes: AI,
    status: 202,
    tag: 'media',
    summary:
      'Dispatch a walkable 3D space (space_ job): exactly one of imageUrl, imageUrls, videoUrl. Charged once, at dispatch (space_full or space_preview). The job result (SpaceResult) shows stage preview while processing, then stage space on completion.',
    body: SpaceRequest,
    response: SpaceAccepted,
    idempotent: true,
    errors: {
      '400':
        'Validation failed: not exactly one of imageUrl, imageUrls, videoUrl, a URL that is not http(s), longer than 2048 characters or private (SSRF guard), more than 8 imageUrls, a title over 80 characters (the message names the field).',
      '503':
        'imageUrls or videoUrl on a deployment without the room engine (room_engine_unavailable); nothing is charged.',
    },
  }),
  getJob: e({
    method: 'get',
    path: '/jobs/{id}',
    scopes: R_AI,
    status: 200,
    tag: 'media',
    summary:
      'Poll any job by its type-prefixed id. With Prefer: wait=N (1 to 60 seconds) the answer waits until the job differs from what the client has (the ETag in If-None-Match, else the state when the request arrived) or N seconds passed, whichever is first; a finished job answers at once.',
    response: JobEnvelope,
    requestHeaders: {
      Prefer:
        'wait=N (RFC 7240): hold the answer up to N seconds (1 to 60; more counts as 60) until the job changes. Other preferences are ignored.',
      'If-None-Match':
        'The ETag of the state the client has: 304 Not Modified while the job is still in that state (after the wait, with Prefer: wait).',
    },
    successHeaders: {
      ETag: 'The state of the job, quoted; changes whenever anything in the envelope does. The same value is the id of the job event stream events.',
      'Preference-Applied': 'wait=N, the wait that was honoured (present when Prefer: wait was).',
    },
    emptyAnswers: {
      '304': 'If-None-Match names the current state: the job has not changed (within the wait, with Prefer: wait).',
    },
  }),
  getJobEvents: e({
    method: 'get',
    path: '/jobs/{id}/events',
    scopes: R_AI,
    status: 200,
    tag: 'media',
    summary:
      'The job as Server-Sent Events: its state now, then each change within milliseconds of it (from any process), until it finishes.',
    stream: {
      mediaType: 'text/event-stream',
      description:
        'First `retry: 2000`; then one event per state the client has not seen: `id:` the job ETag (as GET /jobs/{id}), `event:` progress (queued or processing, with progressMessage and, for space jobs, the preview result), complete or failed; `data:` the whole JobEnvelope as JSON. While nothing changes, a `: heartbeat` comment every JOB_EVENTS_HEARTBEAT_MS (15 s). The server ends the stream after the complete or failed event, or when the API process shuts down (reconnect with Last-Event-ID). A resumed stream sends the latest state, not the ones in between.',
      headers: { 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' },
    },
    requestHeaders: {
      'Last-Event-ID':
        'The id of the last event received (an EventSource sends it when it reconnects): the state it names is not sent again.',
    },
    emptyAnswers: {
      '204': 'Last-Event-ID names the final state: nothing more will come (an EventSource stops reconnecting).',
    },
    errors: {
      '503':
        'This API process holds JOB_EVENT_STREAMS_MAX streams and waits already (service_unavailable, Retry-After: 1).',
    },
  }),
  createResearch: e({
    method: 'post',
    path: '/research',
    scopes: AI,
    status: 202,
    tag: 'media',
    summary: 'Dispatch a research report (res_ job).',
    body: ResearchRequest,
    response: JobAccepted,
    idempotent: true,
  }),
  getResearch: e({
    method: 'get',
    path: '/research/{jobId}',
    scopes: R_AI,
    status: 200,
    tag: 'media',
    summary: 'Legacy alias of GET /jobs/{id} with the legacy research shape.',
    response: ResearchLegacy,
  }),

  // 4.8 Voice
  createSpeech: e({
    method: 'post',
    path: '/speech',
    scopes: AI,
    status: 200,
    tag: 'voice',
    summary: 'Speak one sentence: raw 24 kHz mono PCM, streamed while produced.',
    body: SpeechRequest,
    stream: {
      mediaType: SPEECH_MEDIA_TYPE,
      description: `Raw PCM, no header: signed 16-bit little-endian samples, ${SPEECH_AUDIO.sampleRate} Hz, mono (${SPEECH_AUDIO.sampleRate * 2} bytes a second), chunked transfer, each chunk sent as the speech pool produces it. Charged per character of the trimmed text (operation speech_char) once the first audio is sent; refused calls and failures before any audio are not charged. A failure after audio was sent closes the connection without the final chunk (the client sees an incomplete body) and the charge stands. Audio stops at 30 s (X-Audio-Max-Seconds; the body then ends cleanly at exactly 1,440,000 bytes). Read the body as it arrives: a client that leaves more than 1 MiB unread at the API is cut like a failure (charged).`,
      headers: {
        'X-Audio-Sample-Rate': '24000.',
        'X-Audio-Channels': '1.',
        'X-Audio-Encoding': 's16le (signed 16-bit little-endian; audio/L16 itself would be big-endian).',
        'X-Speech-Voice': 'The voice that spoke (the default resolved to its name).',
        'X-Speech-Engine': 'The synthesiser: espeak-ng-local or openai-compatible:<model>.',
        'X-Speech-Characters': 'Characters charged for (Unicode code points of the trimmed text).',
        'X-Credits-Charged': 'Credits charged: characters × the speech_char price.',
        'X-Audio-Max-Seconds': 'Longest audio one call produces (30); a body of exactly that length was stopped there.',
      },
    },
    errors: {
      '400':
        'Validation failed: text longer than one sentence or line (send one sentence per call), or an unknown voice (the message names the field).',
      '402': 'The balance cannot cover the characters (insufficient_credits); nothing is synthesised.',
      '503': 'The speech engine failed or is unreachable before any audio (service_unavailable); nothing is charged.',
      '504': 'No audio within SPEECH_RPC_TIMEOUT_MS (timeout); nothing is charged.',
    },
  }),
  listVoices: e({
    method: 'get',
    path: '/speech/voices',
    scopes: R_AI,
    status: 200,
    tag: 'voice',
    summary:
      'List voices by name, with language, gender where known, engine, and the default marked (all in one page unless limit is given).',
    query: WholeListQuery,
    response: VoiceList,
  }),
  createLiveSession: e({
    method: 'post',
    path: '/live/session',
    scopes: AI,
    status: 200,
    tag: 'voice',
    summary:
      'Open a real-time voice session: a short-lived single-use token locked to persona, voice, tools and turn detection, and the realtime WebSocket URL (protocol in the README). A new session is charged once (live_session); a resumptionHandle continues a dropped conversation for free.',
    body: LiveSessionRequest,
    response: LiveSessionResponse,
    errors: {
      '400':
        'Validation failed (unknown voice names voice), ambient without the proactiveAudio feature (ambient_not_available), a forged handle (invalid_resumption_handle), an expired or superseded one (resumption_handle_expired), or a handle of a session that ended (session_ended).',
      '402': 'The balance cannot cover live_session (insufficient_credits); no session was made.',
      '404': 'The resumptionHandle names a session of another account (not_found).',
    },
  }),
  runLiveAction: e({
    method: 'post',
    path: '/live/action',
    scopes: AI,
    status: 200,
    tag: 'voice',
    summary:
      'Run a server tool of a live conversation (the realtime engine runs its server tools through the same code). Charged live_action only on success (a hold captured on success, released on failure); generate_image also charges image.',
    body: LiveActionRequest,
    response: LiveActionResponse,
    errors: {
      '400': 'Validation failed: an unknown action, or params that do not fit it (the message names params.<field>).',
      '402': 'The balance cannot cover the action (insufficient_credits); nothing was run.',
      '403':
        "The key lacks the scope of the action's tool (forbidden: list_projects, get_account and recall need read; add_flowchart_steps, remember and forget need write; checked before params), or lacks ai, or the plan lacks API access; nothing was run.",
    },
  }),

  // 4.9 Agents
  chatCompletions: e({
    method: 'post',
    path: '/chat/completions',
    scopes: AI,
    status: 200,
    tag: 'agents',
    summary:
      'OpenAI-style chat-completions facade: model agent:<agentId>; the last user message starts a run (fee agent_run) on the thread metadata.thread_id, else user, else a new one, and the answer waits for it to complete or pause (AGENT_RUN_WAIT_MS). stream false: AgentCompletionResponse; stream true: text/event-stream with `: keepalive` comments while the agent works, one chat.completion.chunk holding the whole reply (plus opencharts), then data: [DONE]. A paused run answers a sentence naming the action and its approveUrl, with opencharts.status paused. An Idempotency-Key header (1 to 255 visible ASCII characters; the openai client sends none unless its request options set one) names the run: a retry with the same key starts nothing and is not billed again, it waits for the same run and answers from it, streamed or not; the same key with another agent or last user message answers 422 idempotency_key_reused.',
    body: AgentCompletionRequest,
    response: AgentCompletionResponse,
    stream: { mediaType: 'text/event-stream', description: AGENT_COMPLETION_STREAM_DESCRIPTION },
    errors: {
      '402': 'The balance cannot cover the run fee (insufficient_credits); nothing was started.',
      '404': 'No agent of yours has that id (not_found).',
      '502':
        'The run failed (agent_run_failed; the message says why and whether its fee was refunded: it is when no tool had delivered work). In a stream: a data chunk {error: {code, message}} then [DONE].',
      '504':
        'The run did not complete or pause within AGENT_RUN_WAIT_MS (timeout); it goes on, and the message names its resultUrl.',
      '422': 'The Idempotency-Key was used with another agent or last user message (idempotency_key_reused).',
    },
  }),
  runAgent: e({
    location: (r) => `/agents/${String(r.agentId)}/runs/${String(r.runId)}`,
    method: 'post',
    path: '/agents/{id}/run',
    scopes: AI,
    status: 202,
    tag: 'agents',
    summary:
      'Dispatch an agent with an instruction (a task rather than a conversational message): the run sees the thread as history and its reply is appended to the thread, the instruction is not. Charges the run fee (agent_run) at acceptance; a failed run refunds it once, unless its tools had delivered work before it failed.',
    body: AgentRunRequest,
    response: AgentMessageAccepted,
    idempotent: true,
    errors: { '402': 'The balance cannot cover the run fee (insufficient_credits); nothing was queued.' },
  }),
  messageAgent: e({
    location: (r) => `/agents/${String(r.agentId)}/runs/${String(r.runId)}`,
    method: 'post',
    path: '/agents/{id}/messages',
    scopes: AI,
    status: 202,
    tag: 'agents',
    summary:
      'Send a message to an agent thread (a new thr_ thread when threadId is omitted). The run sees the thread as history; the message and the reply are appended to it. Charges the run fee (agent_run) at acceptance; a failed run refunds it once, unless its tools had delivered work before it failed.',
    body: AgentMessageRequest,
    response: AgentMessageAccepted,
    idempotent: true,
    errors: { '402': 'The balance cannot cover the run fee (insufficient_credits); nothing was queued.' },
  }),
  listAgentRuns: e({
    method: 'get',
    path: '/agents/{id}/runs',
    scopes: R,
    status: 200,
    tag: 'agents',
    summary: 'List the runs of an agent, newest first (list envelope; optional status filter).',
    query: AgentRunListQuery,
    response: AgentRunList,
  }),
  getAgentRun: e({
    method: 'get',
    path: '/agents/{id}/runs/{runId}',
    scopes: R,
    status: 200,
    tag: 'agents',
    summary: 'Run status: state, credits used, a summary of the pending approval.',
    response: AgentRunView,
  }),
  getAgentRunResult: e({
    method: 'get',
    path: '/agents/{id}/runs/{runId}/result',
    scopes: R_AI,
    status: 200,
    tag: 'agents',
    summary: 'Run result: reply, artifacts, steps, and the pending approval with its reviewToken.',
    response: AgentRunResult,
  }),
  approveAgentRun: e({
    location: (_r, p) => `/agents/${p.id}/runs/${p.runId}`,
    method: 'post',
    path: '/agents/{id}/runs/{runId}/approve',
    scopes: AI,
    status: 202,
    tag: 'agents',
    summary:
      'Decide on a paused action (owner only). approve with scope once (this call), task (this action for the rest of the run) or always (this action in every later run of the agent); reject (scope once) skips the action: the run resumes, the step is marked rejected, and the reply says the action was not taken. A repeat of the recorded decision answers already_recorded.',
    body: AgentRunApproveRequest,
    response: AgentRunApproveAccepted,
    errors: {
      '400':
        "Validation failed, a scope not offered in availableScopes, or a reviewToken that is not the review's (invalid_review_token).",
      '409':
        'The run is not paused and no decision was recorded for that review, or a different decision was (run_not_paused).',
    },
  }),
  getAgentUsage: e({
    method: 'get',
    path: '/agents/{id}/usage',
    scopes: R,
    status: 200,
    tag: 'agents',
    summary:
      'Usage over the last `days` (1 to 90, default 7): runs created in the window by status and trigger, credits, mean duration; at most 10,000 runs are read (truncated says when more).',
    query: AgentUsageQuery,
    response: AgentUsage,
  }),

  // 4.10 Drive
  listDriveFiles: e({
    method: 'get',
    path: '/drive/files',
    scopes: DR,
    status: 200,
    tag: 'drive',
    query: DriveFileListQuery,
    response: DriveFileList,
    summary:
      "Files of the personal drive (or, with teamId, of a team drive the account belongs to: read-only), newest first (trash=true: only trashed files, most recently trashed first), with the folder tree (fileCount per folder), the storage meter (null for a pinned key), the scope and the account's teams. Filters folderId (an id, root, or omitted for all), kind, starred, trash. Keyset pages: limit 1 to 100 (default 20), opaque cursor; hasMore is true when cursor is set. A key pinned to folders sees only files inside them.",
    errors: {
      '404':
        'teamId names no team of the account, or folderId no folder of the drive (or one outside the key pins; root is outside every pin).',
    },
  }),
  createDriveFile: e({
    method: 'post',
    path: '/drive/files',
    scopes: DW,
    status: 201,
    tag: 'drive',
    body: DriveFileCreate,
    response: DriveFile,
    summary:
      'Upload a file: name with an extension (max 255), exactly one of content (UTF-8 text of an md, txt, csv, html or json file, up to 2 MB) or contentBase64 (any bytes, up to 4 MB decoded), optional folderId (id, root or null), description (max 2000), tags (max 20). kind and mimeType come from the bytes (magic numbers) and then the extension. A name taken in the folder gets a suffix: report.pdf, report (1).pdf, report (2).pdf. The text inside follows in the background (textStatus). Bodies over 6 MiB are refused before parsing (413 payload_too_large).',
    errors: {
      '403': 'folderId is a team-drive folder (team_drive_read_only): team drives are read-only over the API.',
      '404': 'folderId names no folder of the drive, or one outside the key pins (the root is outside every pin).',
      '413':
        'The upload would pass the plan storage quota (storage_quota_exceeded; trashed files count until purged), or the body is over 6 MiB (payload_too_large).',
    },
  }),
  getDriveFile: e({
    method: 'get',
    path: '/drive/files/{id}',
    scopes: DR,
    status: 200,
    tag: 'drive',
    response: DriveFileHandle,
    summary:
      'A file handle (own or of a team drive the account belongs to) with a signed downloadUrl valid about 15 minutes (null while trashed); ETag is its version.',
  }),
  updateDriveFile: e({
    ifMatch: true,
    method: 'patch',
    path: '/drive/files/{id}',
    scopes: DW,
    status: 200,
    tag: 'drive',
    body: DriveFileUpdate,
    response: DriveFile,
    summary:
      'Rename, move (folderId: id, root or null), star, tag, describe: only the fields sent change, in one atomic update. kind and mimeType stay as the bytes said. Honours If-Match.',
    errors: {
      '403': 'The file or the destination folder is in a team drive (team_drive_read_only).',
      '404': 'No such file of yours (or outside the key pins), or folderId names no folder you can write in.',
      '409':
        'The name is taken in the destination folder (conflict: PATCH never renames for you), or the file is in the trash (conflict: restore it first).',
      '412': 'If-Match names an older version (precondition_failed).',
    },
  }),
  getDriveFileContent: e({
    method: 'get',
    path: '/drive/files/{id}/content',
    scopes: DR,
    status: 302,
    tag: 'drive',
    response: DriveDownloadLink,
    summary: `Redirect (302, Location) to a signed, time-limited stream of the raw bytes; clients follow it with a plain GET. Cache-Control: no-store; the body repeats the link. A trashed file, another account's or one outside the key pins is 404. ${DRIVE_DOWNLOAD_RULES}`,
  }),
  getDriveFileText: e({
    method: 'get',
    path: '/drive/files/{id}/text',
    scopes: DR,
    status: 200,
    tag: 'drive',
    response: DriveFileText,
    summary:
      "The text of a file (own, or of a team drive the account belongs to, inside the key pins): UTF-8 for text and code files, parsed for PDF (text layer), DOCX, XLSX and PPTX; at most 12,000 characters cut on a word boundary, truncated: true when anything was left out. Text is extracted by the drive pool shortly after upload: until then textStatus is pending, content is '' and the answer carries Retry-After: 2 (still 200: poll until textStatus is ready, none or failed).",
    errors: {
      '404':
        'No file with this id that the caller can reach (another account, a team it is not in, or outside the key pins).',
    },
  }),
  bulkDriveFiles: e({
    method: 'post',
    path: '/drive/files/bulk',
    scopes: DW,
    status: 200,
    tag: 'drive',
    body: DriveBulkRequest,
    response: DriveBulkResult,
    summary:
      'Move (folderId: id or root), star, unstar, trash or restore 1 to 100 files (duplicates count once). Each file changes atomically on its own; the answer lists succeeded ids and failed {fileId, reason}: not_found (unknown, not yours, outside the key pins), already_trashed, not_trashed, restore_window_expired (trashed over DRIVE_TRASH_DAYS, 30, ago), folder_not_found, name_conflict, team_drive_read_only, trashed (move or star of a trashed file), internal_error (that file failed unexpectedly; the others went on). Move and restore take the next free "name (n).ext" when the name is taken.',
  }),
  searchDrive: e({
    method: 'get',
    path: '/drive/search',
    scopes: DR,
    status: 200,
    tag: 'drive',
    query: DriveSearchQuery,
    response: DriveSearchResult,
    summary:
      'Ranked search over file names, tags, descriptions and extracted text: the personal drive and every team drive of the account (or only teamId). Every word of q must match as a whole word (case, accents and width ignored; Chinese and Japanese split into words). Score per word: name 16, tag 8, description 3, text 1 (summed over the fields it is in), best first, then newest. Each hit has the file, its score, matchField and a snippet of about 160 characters with highlights. Trashed files and files outside the key pins are never listed; filters kind, teamId; limit 1 to 50 (default 20).',
    errors: { '404': 'teamId names no team of the account.' },
  }),
  listDriveFolders: e({
    method: 'get',
    path: '/drive/folders',
    scopes: DR,
    status: 200,
    tag: 'drive',
    query: DriveFolderListQuery,
    response: DriveFolderTree,
    summary:
      'The whole folder tree of the personal drive (or a team drive with teamId), flat with parentFolderId and path, parents before children, siblings by name, each with fileCount (active files directly inside); at most 1000 folders, all in one page unless limit is given (then cursor pages on, keeping the order).',
    errors: { '404': 'teamId names no team of the account.' },
  }),
  createDriveFolder: e({
    method: 'post',
    path: '/drive/folders',
    scopes: DW,
    status: 201,
    tag: 'drive',
    body: DriveFolderCreate,
    response: DriveFolder,
    summary:
      'Create a folder: name (unique among its siblings, case-insensitive), parentFolderId (omit, root or null for the root), color (#rrggbb or #rgb), sticker (one emoji). At most 1000 folders per drive, 20 levels deep.',
    errors: {
      '403': 'parentFolderId is a team-drive folder (team_drive_read_only).',
      '404': 'parentFolderId names no folder you can write in (or the root, for a key pinned to folders).',
      '409':
        'A sibling has that name (conflict), or the drive has 1000 folders or the folder would be deeper than 20 levels (limit_exceeded).',
    },
  }),
  updateDriveFolder: e({
    ifMatch: true,
    method: 'patch',
    path: '/drive/folders/{id}',
    scopes: DW,
    status: 200,
    tag: 'drive',
    body: DriveFolderUpdate,
    response: DriveFolder,
    summary:
      'Rename, recolour, change the sticker (null clears color or sticker) or move a folder with parentFolderId (id, root or null) with everything inside it (not in SPEC 4.10; ours). Only the fields sent change. Honours If-Match.',
    errors: {
      '403': 'The folder or the new parent is in a team drive (team_drive_read_only).',
      '404': 'No such folder of yours (or outside the key pins), or parentFolderId names no folder you can write in.',
      '409':
        'Moving into itself or its own subtree (folder_cycle); a sibling has that name (conflict); the move would nest deeper than 20 levels (limit_exceeded).',
      '412': 'If-Match names an older version (precondition_failed).',
    },
  }),

  // 4.11 Webhooks
  listWebhooks: e({
    method: 'get',
    path: '/webhooks',
    scopes: R,
    status: 200,
    tag: 'webhooks',
    summary: 'List webhooks (all, at most 10, in one page unless limit is given).',
    query: WholeListQuery,
    response: WebhookList,
  }),
  createWebhook: e({
    method: 'post',
    path: '/webhooks',
    scopes: W,
    status: 201,
    tag: 'webhooks',
    summary:
      'Create a webhook; the signing secret is returned once. At most 10 per account: the 11th answers 409 limit_exceeded.',
    body: WebhookCreate,
    response: WebhookCreated,
    errors: { '409': 'The account already has 10 webhooks (limit_exceeded).' },
  }),
  getWebhook: e({
    method: 'get',
    path: '/webhooks/{id}',
    scopes: R,
    status: 200,
    tag: 'webhooks',
    summary: 'Get a webhook.',
    response: Webhook,
  }),
  updateWebhook: e({
    method: 'patch',
    path: '/webhooks/{id}',
    scopes: W,
    status: 200,
    tag: 'webhooks',
    summary:
      'Update name, url, events or isActive; isActive true re-enables a disabled webhook and resets its failure count.',
    body: WebhookUpdate,
    response: Webhook,
  }),
  deleteWebhook: e({
    method: 'delete',
    path: '/webhooks/{id}',
    scopes: W,
    status: 204,
    tag: 'webhooks',
    summary: 'Delete a webhook.',
  }),
  listWebhookDeliveries: e({
    method: 'get',
    path: '/webhooks/{id}/deliveries',
    scopes: R,
    status: 200,
    tag: 'webhooks',
    summary: 'Recent delivery attempts, newest first.',
    query: WebhookDeliveriesQuery,
    response: WebhookDeliveryList,
  }),
} as const satisfies Record<string, Endpoint>;
