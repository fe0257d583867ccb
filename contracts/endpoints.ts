import { z } from 'zod';
import { AccountResponse, CreditsResponse } from './account';
import { CodeBuildRequest } from './code-builds';
import { ImageRequest, ImageResult, MoonlightRequest, MoonlightResult } from './images';
import { PresentationCreated, PresentationRequest } from './presentations';
import { ResearchLegacy, ResearchRequest } from './research';
import { SongRequest } from './songs';
import { Webhook, WebhookCreate, WebhookCreated, WebhookDeliveriesQuery, WebhookDeliveryList, WebhookList, WebhookUpdate } from './webhooks';
import { JobAccepted, JobEnvelope, listEnvelope } from './common';
import type { Scope } from './registry';
import { VideoAccepted, VideoRequest } from './videos';

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
  /** Errors particular to this endpoint, by HTTP status (the common ones are added for all). */
  errors?: Record<string, string>;
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
  getOpenapi: e({ method: 'get', path: '/openapi', scopes: [], status: 200, tag: 'meta', summary: 'The OpenAPI 3.1 document (no key needed).' }),
  getAccount: e({ method: 'get', path: '/account', scopes: R, status: 200, tag: 'account', summary: 'Authenticated account (whoami).', response: AccountResponse }),
  getCredits: e({ method: 'get', path: '/account/credits', scopes: R, status: 200, tag: 'account', summary: 'Plan and AI credit balance.', response: CreditsResponse }),

  // 4.2 Personas
  listPersonas: e({ method: 'get', path: '/personas', scopes: R, status: 200, tag: 'personas', summary: 'List personas.' }),
  createPersona: e({ method: 'post', path: '/personas', scopes: W, status: 201, tag: 'personas', summary: 'Create a persona.' }),
  getPersona: e({ method: 'get', path: '/personas/{id}', scopes: R, status: 200, tag: 'personas', summary: 'Get a persona.' }),
  updatePersona: e({ method: 'patch', path: '/personas/{id}', scopes: W, status: 200, tag: 'personas', summary: 'Update a persona.' }),
  deletePersona: e({ method: 'delete', path: '/personas/{id}', scopes: W, status: 204, tag: 'personas', summary: 'Delete a persona.' }),
  publishPersona: e({ method: 'post', path: '/personas/{id}/publish', scopes: W, status: 200, tag: 'personas', summary: 'Publish a persona.' }),
  listPersonaDeployments: e({ method: 'get', path: '/personas/{id}/deployments', scopes: R, status: 200, tag: 'personas', summary: 'List deployments.' }),
  createPersonaDeployment: e({ method: 'post', path: '/personas/{id}/deployments', scopes: W, status: 201, tag: 'personas', summary: 'Create a deployment.' }),
  startPersonaConversation: e({ method: 'post', path: '/personas/{id}/conversations', scopes: W, status: 201, tag: 'personas', summary: 'Start a persona conversation.' }),
  endPersonaConversation: e({ method: 'post', path: '/personas/{id}/conversations/{cid}/end', scopes: W, status: 200, tag: 'personas', summary: 'End a persona conversation.' }),
  listPersonaConversationEvents: e({ method: 'get', path: '/personas/{id}/conversations/{cid}/events', scopes: R, status: 200, tag: 'personas', summary: 'List conversation events.' }),
  listPersonaFaces: e({ method: 'get', path: '/personas/faces', scopes: R, status: 200, tag: 'personas', summary: 'List available persona faces.' }),

  // 4.3 Projects and creation
  listProjects: e({ method: 'get', path: '/projects', scopes: R, status: 200, tag: 'projects', summary: 'List projects.' }),
  getProject: e({ method: 'get', path: '/projects/{id}', scopes: R, status: 200, tag: 'projects', summary: 'Get a project.' }),
  updateProject: e({ method: 'patch', path: '/projects/{id}', scopes: W, status: 200, tag: 'projects', summary: "Update a project's metadata or content." }),
  deleteProject: e({ method: 'delete', path: '/projects/{id}', scopes: W, status: 204, tag: 'projects', summary: 'Delete a project.' }),
  createFlowchart: e({ method: 'post', path: '/flowcharts', scopes: W, status: 201, tag: 'projects', summary: 'Create a flowchart project.' }),
  createWhiteboard: e({ method: 'post', path: '/whiteboards', scopes: W, status: 201, tag: 'projects', summary: 'Create a whiteboard project.' }),
  createNotes: e({ method: 'post', path: '/notes', scopes: W, status: 201, tag: 'projects', summary: 'Create a notes project.' }),
  createPresentation: e({ method: 'post', path: '/presentations', scopes: W, status: 201, tag: 'projects', summary: 'Create a presentation; slides build in the background as a deck_ job.', body: PresentationRequest, response: PresentationCreated, idempotent: true }),
  listTemplates: e({ method: 'get', path: '/templates', scopes: R, status: 200, tag: 'projects', summary: 'List templates.' }),
  useTemplate: e({ method: 'post', path: '/templates/{id}/use', scopes: W, status: 201, tag: 'projects', summary: 'Create a project from a template.' }),

  // 4.4 Sheets
  listSheets: e({ method: 'get', path: '/sheets', scopes: R, status: 200, tag: 'sheets', summary: 'List sheets.' }),
  createSheet: e({ method: 'post', path: '/sheets', scopes: W, status: 201, tag: 'sheets', summary: 'Create a sheet.' }),
  getSheet: e({ method: 'get', path: '/sheets/{id}', scopes: R, status: 200, tag: 'sheets', summary: "Read a sheet's rows." }),
  getSheetRange: e({ method: 'get', path: '/sheets/{id}/range', scopes: R, status: 200, tag: 'sheets', summary: 'Read a sheet range.' }),
  applySheetOps: e({ method: 'post', path: '/sheets/{id}/ops', scopes: W, status: 200, tag: 'sheets', summary: 'Apply or propose structured ops.' }),
  editSheet: e({ method: 'post', path: '/sheets/{id}/edit', scopes: AI, status: 200, tag: 'sheets', summary: 'Edit by natural-language instruction.' }),
  listSheetCommits: e({ method: 'get', path: '/sheets/{id}/commits', scopes: R, status: 200, tag: 'sheets', summary: 'List commits.' }),
  getSheetCommit: e({ method: 'get', path: '/sheets/{id}/commits/{commitId}', scopes: R, status: 200, tag: 'sheets', summary: 'Get a commit diff.' }),
  resolveSheetCommit: e({ method: 'post', path: '/sheets/{id}/commits/{commitId}/resolve', scopes: W, status: 200, tag: 'sheets', summary: 'Merge or reject a proposed commit.' }),
  rollbackSheet: e({ method: 'post', path: '/sheets/{id}/rollback', scopes: W, status: 200, tag: 'sheets', summary: 'Roll the sheet back to a commit.' }),

  // 4.5 Boards
  listBoards: e({ method: 'get', path: '/boards', scopes: R, status: 200, tag: 'boards', summary: 'List boards.' }),
  createBoard: e({ method: 'post', path: '/boards', scopes: W, status: 201, tag: 'boards', summary: 'Create a board.' }),
  getBoard: e({ method: 'get', path: '/boards/{id}', scopes: R, status: 200, tag: 'boards', summary: 'Get a board.' }),
  updateBoard: e({ method: 'patch', path: '/boards/{id}', scopes: W, status: 200, tag: 'boards', summary: 'Update a board.' }),
  deleteBoard: e({ method: 'delete', path: '/boards/{id}', scopes: W, status: 204, tag: 'boards', summary: 'Delete a board.' }),
  duplicateBoard: e({ method: 'post', path: '/boards/{id}/duplicate', scopes: W, status: 201, tag: 'boards', summary: 'Duplicate a board.' }),
  listCards: e({ method: 'get', path: '/boards/{id}/cards', scopes: R, status: 200, tag: 'boards', summary: 'List cards.' }),
  createCard: e({ method: 'post', path: '/boards/{id}/cards', scopes: W, status: 201, tag: 'boards', summary: 'Create a card.' }),
  updateCard: e({ method: 'patch', path: '/boards/{id}/cards/{cardId}', scopes: W, status: 200, tag: 'boards', summary: 'Update a card.' }),
  deleteCard: e({ method: 'delete', path: '/boards/{id}/cards/{cardId}', scopes: W, status: 204, tag: 'boards', summary: 'Delete a card.' }),

  // 4.6 Chat and conversations
  chat: e({ method: 'post', path: '/chat', scopes: AI, status: 200, tag: 'chat', summary: 'One assistant turn: a UI-message SSE stream, or assembled JSON with stream false.' }),
  listConversations: e({ method: 'get', path: '/conversations', scopes: R, status: 200, tag: 'chat', summary: 'List conversations.' }),
  createConversation: e({ method: 'post', path: '/conversations', scopes: W, status: 201, tag: 'chat', summary: 'Create a conversation.' }),
  getConversation: e({ method: 'get', path: '/conversations/{id}', scopes: R, status: 200, tag: 'chat', summary: 'Get a conversation.' }),
  updateConversation: e({ method: 'patch', path: '/conversations/{id}', scopes: W, status: 200, tag: 'chat', summary: 'Update title or mode.' }),
  deleteConversation: e({ method: 'delete', path: '/conversations/{id}', scopes: W, status: 204, tag: 'chat', summary: 'Delete the conversation and its messages.' }),
  listConversationMessages: e({ method: 'get', path: '/conversations/{id}/messages', scopes: R, status: 200, tag: 'chat', summary: 'List messages, oldest first.' }),

  // 4.7 Media and jobs
  extractFlowchart: e({ method: 'post', path: '/extract-flowchart', scopes: AI, status: 201, tag: 'media', summary: 'Create a flowchart project from a PDF, PPTX or image.' }),
  createImage: e({ method: 'post', path: '/images', scopes: AI, status: 200, tag: 'media', summary: 'Synchronous image generation.', body: ImageRequest, response: ImageResult, errors: { '403': 'Explicit svc-ultra on the Free plan (forbidden), or scope/plan.', '504': 'The image pool did not answer within the deadline (timeout); nothing is charged.' } }),
  createMoonlightImage: e({ method: 'post', path: '/images/moonlight', scopes: AI, status: 200, tag: 'media', summary: 'Synchronous in-house image model render.', body: MoonlightRequest, response: MoonlightResult, errors: { '400': 'Validation failed, a non-empty negativePrompt, or a prompt describing adult content.', '403': 'The finished render was scored adult; nothing is charged.', '504': 'The image pool did not answer within the deadline (timeout); nothing is charged.' } }),
  createVideo: e({ method: 'post', path: '/videos', scopes: AI, status: 202, tag: 'media', summary: 'Dispatch a video render (vid_ job).', body: VideoRequest, response: VideoAccepted, idempotent: true }),
  createSong: e({ method: 'post', path: '/songs', scopes: AI, status: 202, tag: 'media', summary: 'Dispatch a song (song_ job).', body: SongRequest, response: JobAccepted, idempotent: true }),
  createCodeBuild: e({ method: 'post', path: '/code-builds', scopes: AI, status: 202, tag: 'media', summary: 'Dispatch a code build (code_ job): a runnable single-page app.', body: CodeBuildRequest, response: JobAccepted, idempotent: true }),
  createSpace: e({ method: 'post', path: '/real-world/spaces', scopes: AI, status: 202, tag: 'media', summary: 'Dispatch a walkable 3D space (space_ job).', idempotent: true }),
  getJob: e({ method: 'get', path: '/jobs/{id}', scopes: R_AI, status: 200, tag: 'media', summary: 'Poll any job by its type-prefixed id.', response: JobEnvelope }),
  createResearch: e({ method: 'post', path: '/research', scopes: AI, status: 202, tag: 'media', summary: 'Dispatch a research report (res_ job).', body: ResearchRequest, response: JobAccepted, idempotent: true }),
  getResearch: e({ method: 'get', path: '/research/{jobId}', scopes: R_AI, status: 200, tag: 'media', summary: 'Legacy alias of GET /jobs/{id} with the legacy research shape.', response: ResearchLegacy }),

  // 4.8 Voice
  createSpeech: e({ method: 'post', path: '/speech', scopes: AI, status: 200, tag: 'voice', summary: 'Raw 24 kHz mono PCM, streamed while produced.' }),
  listVoices: e({ method: 'get', path: '/speech/voices', scopes: R_AI, status: 200, tag: 'voice', summary: 'List voices by name.' }),
  createLiveSession: e({ method: 'post', path: '/live/session', scopes: AI, status: 200, tag: 'voice', summary: 'Open a real-time voice session; returns a short-lived token.' }),
  runLiveAction: e({ method: 'post', path: '/live/action', scopes: AI, status: 200, tag: 'voice', summary: 'Run a server tool of a live conversation.' }),

  // 4.9 Agents
  chatCompletions: e({ method: 'post', path: '/chat/completions', scopes: AI, status: 200, tag: 'agents', summary: 'OpenAI-style chat-completions facade; the agent runs inline.' }),
  runAgent: e({ method: 'post', path: '/agents/{id}/run', scopes: AI, status: 202, tag: 'agents', summary: 'Dispatch an agent.' }),
  messageAgent: e({ method: 'post', path: '/agents/{id}/messages', scopes: AI, status: 202, tag: 'agents', summary: 'Send a message to an agent thread.' }),
  listAgentRuns: e({ method: 'get', path: '/agents/{id}/runs', scopes: R, status: 200, tag: 'agents', summary: 'List runs.' }),
  getAgentRun: e({ method: 'get', path: '/agents/{id}/runs/{runId}', scopes: R, status: 200, tag: 'agents', summary: 'Run status.' }),
  getAgentRunResult: e({ method: 'get', path: '/agents/{id}/runs/{runId}/result', scopes: R_AI, status: 200, tag: 'agents', summary: 'Run result.' }),
  approveAgentRun: e({ method: 'post', path: '/agents/{id}/runs/{runId}/approve', scopes: AI, status: 202, tag: 'agents', summary: 'Approve or reject a paused action (owner only).' }),
  getAgentUsage: e({ method: 'get', path: '/agents/{id}/usage', scopes: R, status: 200, tag: 'agents', summary: 'Usage over the last `days` (1 to 90).' }),

  // 4.10 Drive
  listDriveFiles: e({ method: 'get', path: '/drive/files', scopes: DR, status: 200, tag: 'drive', summary: 'Files, folder tree, storage meter.' }),
  createDriveFile: e({ method: 'post', path: '/drive/files', scopes: DW, status: 201, tag: 'drive', summary: 'Upload a file.' }),
  getDriveFile: e({ method: 'get', path: '/drive/files/{id}', scopes: DR, status: 200, tag: 'drive', summary: 'A file handle with a signed download link.' }),
  updateDriveFile: e({ method: 'patch', path: '/drive/files/{id}', scopes: DW, status: 200, tag: 'drive', summary: 'Rename, move, star, tag, describe.' }),
  getDriveFileContent: e({ method: 'get', path: '/drive/files/{id}/content', scopes: DR, status: 302, tag: 'drive', summary: 'Redirect to a signed, time-limited stream of the raw bytes.' }),
  getDriveFileText: e({ method: 'get', path: '/drive/files/{id}/text', scopes: DR, status: 200, tag: 'drive', summary: 'Text content, capped at about 12K characters.' }),
  bulkDriveFiles: e({ method: 'post', path: '/drive/files/bulk', scopes: DW, status: 200, tag: 'drive', summary: 'Move, star, unstar, trash or restore up to 100 files.' }),
  searchDrive: e({ method: 'get', path: '/drive/search', scopes: DR, status: 200, tag: 'drive', summary: 'Search names, tags, descriptions and text.' }),
  listDriveFolders: e({ method: 'get', path: '/drive/folders', scopes: DR, status: 200, tag: 'drive', summary: 'Folder tree.' }),
  createDriveFolder: e({ method: 'post', path: '/drive/folders', scopes: DW, status: 201, tag: 'drive', summary: 'Create a folder.' }),

  // 4.11 Webhooks
  listWebhooks: e({ method: 'get', path: '/webhooks', scopes: R, status: 200, tag: 'webhooks', summary: 'List webhooks.', response: WebhookList }),
  createWebhook: e({ method: 'post', path: '/webhooks', scopes: W, status: 201, tag: 'webhooks', summary: 'Create a webhook; the signing secret is returned once. At most 10 per account: the 11th answers 409 limit_exceeded.', body: WebhookCreate, response: WebhookCreated, errors: { '409': 'The account already has 10 webhooks (limit_exceeded).' } }),
  getWebhook: e({ method: 'get', path: '/webhooks/{id}', scopes: R, status: 200, tag: 'webhooks', summary: 'Get a webhook.', response: Webhook }),
  updateWebhook: e({ method: 'patch', path: '/webhooks/{id}', scopes: W, status: 200, tag: 'webhooks', summary: 'Update name, url, events or isActive; isActive true re-enables a disabled webhook and resets its failure count.', body: WebhookUpdate, response: Webhook }),
  deleteWebhook: e({ method: 'delete', path: '/webhooks/{id}', scopes: W, status: 204, tag: 'webhooks', summary: 'Delete a webhook.' }),
  listWebhookDeliveries: e({ method: 'get', path: '/webhooks/{id}/deliveries', scopes: R, status: 200, tag: 'webhooks', summary: 'Recent delivery attempts, newest first.', query: WebhookDeliveriesQuery, response: WebhookDeliveryList }),
} as const satisfies Record<string, Endpoint>;

export type EndpointId = keyof typeof endpoints;
export { listEnvelope };
