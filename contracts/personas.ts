import { z } from 'zod';
import { line, listEnvelope, listQuery, text, Version, whenField } from './common';

/**
 * Personas (SPEC 4.2; shapes designed here, SPEC 2.21 shows none). A persona is a configured
 * assistant: name, instructions, voice, face, greeting and tools. Its working copy is edited
 * with PATCH; publish validates it and freezes it as an immutable numbered version. Deployments
 * put one published version on a channel; a conversation is a live session on a deployment.
 * WARNING: field names, limits and error codes here are public contract.
 */
export const PERSONA_LIMITS = {
  nameMax: 80,
  descriptionMax: 500,
  instructionsMax: 8000,
  greetingMax: 500,
  toolsMax: 32,
  deploymentNameMax: 80,
  originsMin: 1,
  originsMax: 20,
} as const;

export const PERSONA_STATUSES = ['draft', 'published'] as const;
export const PERSONA_CHANNELS = ['web', 'voice', 'api'] as const;
export type PersonaChannel = (typeof PERSONA_CHANNELS)[number];
export const PERSONA_EVENT_TYPES = ['started', 'user_turn', 'assistant_turn', 'tool_call', 'ended'] as const;
export type PersonaEventType = (typeof PERSONA_EVENT_TYPES)[number];

const nonEmpty = { error: 'must not be empty' };

const name = line(PERSONA_LIMITS.nameMax).trim().min(1, nonEmpty);
const description = text(PERSONA_LIMITS.descriptionMax);
const instructions = text(PERSONA_LIMITS.instructionsMax);
const greeting = text(PERSONA_LIMITS.greetingMax);
const voice = line(64).trim().min(1, nonEmpty);
const faceId = line(64).trim().min(1, nonEmpty);
const tools = z
  .array(line(64).min(1, nonEmpty), { error: 'must be an array of tool names' })
  .max(PERSONA_LIMITS.toolsMax, { error: `must have at most ${PERSONA_LIMITS.toolsMax} tools` });

const fields = {
  description: description
    .optional()
    .describe(`What the persona is for, up to ${PERSONA_LIMITS.descriptionMax} characters; default empty.`),
  instructions: instructions
    .optional()
    .describe(
      `The system instructions, up to ${PERSONA_LIMITS.instructionsMax} characters; required (non-empty) to publish.`,
    ),
  voice: voice
    .optional()
    .describe(
      'A voice name from GET /speech/voices ("default" or omitted: the default voice, stored by its name). Unknown: 400 naming voice.',
    ),
  faceId: faceId
    .nullable()
    .optional()
    .describe('A face id from GET /personas/faces, or null; required to publish. Unknown: 400 naming faceId.'),
  greeting: greeting
    .optional()
    .describe(
      `The first line the persona says, up to ${PERSONA_LIMITS.greetingMax} characters; required (non-empty) to publish.`,
    ),
  tools: tools
    .optional()
    .describe(
      'Names of assistant tools the persona may call (the chat tool catalogue: create_flowchart, create_notes, generate_image, web_search, …); duplicates are dropped; an unknown name is 400 naming tools.<i>. Default none. A conversation offers the live server tools these map to: web_search → search_web; create_presentation, create_notes, create_document, create_flowchart, add_flowchart_steps, create_whiteboard, generate_image under their own names; platform_action → list_projects and get_account; the others have no live action, and memory tools are never offered to a persona.',
    ),
};

export const PersonaCreate = z
  .strictObject({
    name: name.describe(`1 to ${PERSONA_LIMITS.nameMax} characters, one line.`),
    ...fields,
  })
  .meta({ id: 'PersonaCreate' });
export type PersonaCreate = z.output<typeof PersonaCreate>;

/** PATCH: only the fields passed change; the working copy becomes a draft again. */
export const PersonaUpdate = z
  .strictObject({ name: name.optional(), ...fields })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: name, description, instructions, voice, faceId, greeting or tools',
  })
  .meta({ id: 'PersonaUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type PersonaUpdate = z.output<typeof PersonaUpdate>;

/** What a version freezes (and what the working copy holds). */
export const PersonaSnapshot = z.object({
  name: z.string(),
  description: z.string(),
  instructions: z.string(),
  voice: z.string().describe('Catalogue voice name.'),
  faceId: z.string().nullable(),
  greeting: z.string(),
  tools: z.array(z.string()),
});
export type PersonaSnapshot = z.infer<typeof PersonaSnapshot>;

export const PersonaPublished = PersonaSnapshot.extend({
  version: z.number().int().describe('Published version number: 1, 2, … Never changes once published.'),
  publishedAt: z.string(),
}).meta({ id: 'PersonaPublished' });

export const Persona = PersonaSnapshot.extend({
  id: z.string().describe('per_ followed by a random part.'),
  status: z
    .enum(PERSONA_STATUSES)
    .describe(
      'draft: the working copy has changes no version holds (or was never published); published: the working copy is the latest published version.',
    ),
  publishedVersion: z
    .number()
    .int()
    .nullable()
    .describe('The latest published version number; null before the first publish.'),
  published: PersonaPublished.nullable().describe(
    'The latest published version as frozen (what new deployments get by default); null before the first publish. PATCH never changes it.',
  ),
  version: Version,
  createdAt: z.string(),
  updatedAt: z.string(),
}).meta({ id: 'Persona' });
export type Persona = z.infer<typeof Persona>;

export const PersonaList = listEnvelope(Persona).meta({ id: 'PersonaList' });
export const PersonaListQuery = listQuery({
  status: z
    .enum(PERSONA_STATUSES, { error: `must be one of ${PERSONA_STATUSES.join(', ')}` })
    .optional()
    .describe('Only personas in this status.'),
});

// ---- Faces -----------------------------------------------------------------------------

export const PersonaFace = z
  .object({
    id: z.string().describe('Face id, used as faceId.'),
    name: z.string(),
    description: z.string(),
    previewUrl: z
      .string()
      .describe('Absolute URL of an SVG picture of the face, served by this service without a key.'),
  })
  .meta({ id: 'PersonaFace' });
export const PersonaFaceList = listEnvelope(PersonaFace).meta({ id: 'PersonaFaceList' });

// ---- Deployments -----------------------------------------------------------------------

const origin = line(256)
  .regex(/^https:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?$/, { error: 'must be an https origin: https://host[:port], no path' })
  .transform((o) => o.toLowerCase());

export const PersonaDeploymentCreate = z
  .strictObject({
    channel: z
      .enum(PERSONA_CHANNELS, { error: `must be one of ${PERSONA_CHANNELS.join(', ')}` })
      .describe(
        'web: an embed on your pages; voice: the realtime voice engine; api: conversations started by your own code.',
      ),
    version: z
      .number({ error: 'must be an integer' })
      .int({ error: 'must be an integer' })
      .min(1, { error: 'must be at least 1' })
      .optional()
      .describe(
        'A published version number; default the latest. A persona never published: 409 persona_not_published.',
      ),
    allowedOrigins: z
      .array(origin, { error: 'must be an array of https origins' })
      .min(PERSONA_LIMITS.originsMin, { error: `must have at least ${PERSONA_LIMITS.originsMin} origin` })
      .max(PERSONA_LIMITS.originsMax, { error: `must have at most ${PERSONA_LIMITS.originsMax} origins` })
      .optional()
      .describe(
        `web only, and required there: ${PERSONA_LIMITS.originsMin} to ${PERSONA_LIMITS.originsMax} https origins (https://host[:port]) whose pages may embed the persona. Other channels: 400.`,
      ),
    name: line(PERSONA_LIMITS.deploymentNameMax)
      .trim()
      .min(1, nonEmpty)
      .optional()
      .describe('A label; default "<channel> v<version>".'),
  })
  .superRefine((b, ctx) => {
    if (b.channel === 'web' && !b.allowedOrigins)
      ctx.addIssue({ code: 'custom', path: ['allowedOrigins'], message: 'is required for the web channel' });
    if (b.channel !== 'web' && b.allowedOrigins)
      ctx.addIssue({ code: 'custom', path: ['allowedOrigins'], message: 'is only for the web channel' });
  })
  .meta({
    id: 'PersonaDeploymentCreate',
    ...whenField(
      'channel',
      'web',
      { required: ['allowedOrigins'], properties: { allowedOrigins: {} } },
      { not: { required: ['allowedOrigins'], properties: { allowedOrigins: {} } } },
    ),
  }); // the refinement above
export type PersonaDeploymentCreate = z.output<typeof PersonaDeploymentCreate>;

export const PersonaDeploymentConnect = z
  .object({
    conversationsUrl: z
      .string()
      .describe(
        'POST here (with your API key, write and ai scopes) with {deploymentId} to start a conversation; its answer carries the realtime token.',
      ),
    realtimeUrl: z.string().describe('The realtime WebSocket every conversation connects to (protocol in the README).'),
    scriptUrl: z.string().optional().describe('web: the embed script, served without a key.'),
    snippet: z
      .string()
      .optional()
      .describe(
        'web: the HTML to put on a page of an allowed origin; fill data-token with the token of a conversation your server started.',
      ),
    howTo: z.string().describe('How to start and connect on this channel.'),
  })
  .meta({ id: 'PersonaDeploymentConnect' });

export const PersonaDeployment = z
  .object({
    id: z.string().describe('pdep_ followed by a random part.'),
    personaId: z.string(),
    channel: z.enum(PERSONA_CHANNELS),
    version: z.number().int().describe('The published version this deployment serves; it never changes.'),
    name: z.string(),
    allowedOrigins: z.array(z.string()).describe('web: the origins allowed to embed; empty on other channels.'),
    connect: PersonaDeploymentConnect,
    createdAt: z.string(),
  })
  .meta({ id: 'PersonaDeployment' });
export type PersonaDeployment = z.infer<typeof PersonaDeployment>;
export const PersonaDeploymentList = listEnvelope(PersonaDeployment).meta({ id: 'PersonaDeploymentList' });
export const PersonaDeploymentListQuery = listQuery({});

// ---- Conversations ---------------------------------------------------------------------

export const PersonaConversationStart = z
  .strictObject({
    deploymentId: line(128)
      .min(1, nonEmpty)
      .describe("A deployment of this persona (pdep_…); another persona's or account's: 404."),
  })
  .meta({ id: 'PersonaConversationStart' });
export type PersonaConversationStart = z.output<typeof PersonaConversationStart>;

export const PersonaConversationConnect = z
  .object({
    sessionId: z.string().describe('The live session (live_…) behind the conversation.'),
    token: z.string().describe('Signed, single-use realtime token; connect to realtimeUrl?token=… before expiresAt.'),
    expiresAt: z.string(),
    realtimeUrl: z.string(),
    audio: z
      .boolean()
      .describe(
        'voice: true (stream PCM both ways); web and api: false (send input_text events, read assistant.text; PCM replies may be ignored).',
      ),
  })
  .meta({ id: 'PersonaConversationConnect' });

export const PersonaConversation = z
  .object({
    id: z.string().describe('pconv_ followed by a random part.'),
    personaId: z.string(),
    deploymentId: z.string(),
    channel: z.enum(PERSONA_CHANNELS),
    version: z.number().int().describe('The published persona version the conversation is locked to.'),
    status: z.enum(['active', 'ended']),
    startedAt: z.string(),
    endedAt: z.string().nullable(),
    durationMs: z.number().int().nullable().describe('endedAt − startedAt, once ended.'),
    creditsUsed: z
      .number()
      .describe('Credits charged for the conversation: the live session, charged once when it starts.'),
    connect: PersonaConversationConnect.nullable().describe(
      'How to connect; on the start answer only (null once ended).',
    ),
  })
  .meta({ id: 'PersonaConversation' });
export type PersonaConversation = z.infer<typeof PersonaConversation>;

export const PersonaEvent = z
  .object({
    id: z.string(),
    type: z.enum(PERSONA_EVENT_TYPES),
    at: z.string(),
    text: z
      .string()
      .nullable()
      .describe(
        "user_turn / assistant_turn: what was said (the greeting is the first assistant_turn); tool_call: the tool's name; null for the others.",
      ),
    data: z
      .record(z.string(), z.unknown())
      .describe(
        'started: channel, version, sessionId, deploymentId; ended: durationMs, creditsUsed; tool_call: name, callId, artifactType, title, ok (false when the tool failed or was refused).',
      ),
  })
  .meta({ id: 'PersonaEvent' });
export type PersonaEvent = z.infer<typeof PersonaEvent>;
export const PersonaEventList = listEnvelope(PersonaEvent).meta({ id: 'PersonaEventList' });
export const PersonaEventListQuery = listQuery({});
