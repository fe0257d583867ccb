import { z } from 'zod';
import { line, listEnvelope, listQuery, text, Version } from './common';
import { PROJECT_TYPES } from './projects';

/**
 * Conversations and their messages (SPEC 2.8, 4.6). The assistant (POST /chat, a later issue)
 * appends turns with platform/conversations appendMessage; there is no public POST for messages.
 * WARNING: field names and enums here are public contract and persisted.
 */
export const CONVERSATION_LIMITS = {
  /** SPEC 8. */
  titleMax: 256,
  /** Characters of one stored message. */
  contentMax: 200_000,
  /** Artifacts on one message. */
  artifactsMax: 50,
} as const;

/** SPEC 2.7 / 9: the chat modes of v1. Only these are accepted as a conversation's mode. */
export const CHAT_MODES = ['fast', 'think'] as const;
export type ChatMode = (typeof CHAT_MODES)[number];

export const MESSAGE_ROLES = ['user', 'assistant', 'system', 'tool'] as const;
export type MessageRole = (typeof MESSAGE_ROLES)[number];

/** SPEC 2.7 ChatArtifact.type. */
export const ARTIFACT_TYPES = [
  'flowchart',
  'whiteboard',
  'notes',
  'presentation',
  'document',
  'table',
  'sheet',
  'social_board',
  'image',
  'video',
  'song',
  'podcast',
  'web_search',
  'brand_theme',
  'platform_action',
  'error',
] as const;

const mode = z.enum(CHAT_MODES, { error: `must be one of ${CHAT_MODES.join(', ')}` });
const title = line(CONVERSATION_LIMITS.titleMax).trim();

export const ConversationCreate = z
  .strictObject({
    title: title
      .optional()
      .describe(`Up to ${CONVERSATION_LIMITS.titleMax} characters, one line; default null (untitled).`),
    mode: mode
      .optional()
      .describe('Chat mode preference: fast or think (the v1 modes); default null (the assistant uses fast).'),
  })
  .meta({ id: 'ConversationCreate' });
export type ConversationCreate = z.output<typeof ConversationCreate>;

/** PATCH: only the fields passed change; null clears. */
export const ConversationUpdate = z
  .strictObject({
    title: title.nullable().optional().describe(`Up to ${CONVERSATION_LIMITS.titleMax} characters; null clears it.`),
    mode: mode.nullable().optional().describe('fast or think; null clears the preference.'),
  })
  .refine((b) => b.title !== undefined || b.mode !== undefined, {
    error: 'body: name a field to change: title or mode',
  })
  .meta({ id: 'ConversationUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type ConversationUpdate = z.output<typeof ConversationUpdate>;

export const Conversation = z
  .object({
    id: z.string().describe('conv_ followed by a random part.'),
    title: z.string().nullable(),
    mode: z.enum(CHAT_MODES).nullable(),
    messageCount: z.number().int().describe('Messages stored in the conversation.'),
    lastMessageAt: z.string().nullable().describe('When the newest message was added; null while there is none.'),
    version: Version.describe(
      '1 at creation, +1 on every change of title or mode (appended messages do not change it); also the ETag header. Send it back as If-Match: "<version>".',
    ),
    createdAt: z.string(),
    updatedAt: z.string().describe('Last change of title or mode.'),
  })
  .meta({ id: 'Conversation' });
export type Conversation = z.infer<typeof Conversation>;

export const ConversationList = listEnvelope(Conversation).meta({ id: 'ConversationList' });
export const ConversationListQuery = listQuery({});

/** SPEC 2.7 ChatArtifact. */
export const ChatArtifact = z
  .object({
    type: z.enum(ARTIFACT_TYPES),
    title: z.string(),
    projectId: z.string().optional().describe('On project-backed artifacts; for social_board the board id.'),
    projectType: z.enum(PROJECT_TYPES).optional().describe('Flowcharts and whiteboards are chart.'),
    openUrl: z
      .string()
      .optional()
      .describe(
        'Absolute editor link (/editor/{id}, /notes/{id}, /presentations/{id}, /sheets/{id}, /simulations/{id}, /code-editor/{id}, /boards/{boardId}).',
      ),
    data: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'Extra members allowed: apiJobId and pollUrl on async media, the image URL on images, boardId and card counts on boards.',
      ),
  })
  .meta({ id: 'ChatArtifact' });
export type ChatArtifact = z.infer<typeof ChatArtifact>;

/** SPEC 2.7 message.engine: the engine that actually answered; null for white-label tenants. */
export const MessageEngine = z
  .object({
    assistantName: z.string(),
    lab: z.string(),
    labName: z.string(),
    model: z.string(),
  })
  .meta({ id: 'MessageEngine' });
export type MessageEngine = z.infer<typeof MessageEngine>;

export const MessageUsage = z
  .object({
    inputTokens: z.number().int().nonnegative().nullable(),
    outputTokens: z.number().int().nonnegative().nullable(),
  })
  .meta({ id: 'MessageUsage' });
export type MessageUsage = z.infer<typeof MessageUsage>;

export const Message = z
  .object({
    id: z.string().describe('msg_ followed by a random part.'),
    conversationId: z.string(),
    seq: z
      .number()
      .int()
      .describe(
        'Position in the conversation: 1, 2, 3… in the order messages were added (gaps are possible, never duplicates); messages are listed by it.',
      ),
    role: z.enum(MESSAGE_ROLES),
    content: z.string(),
    artifacts: z.array(ChatArtifact),
    engine: MessageEngine.nullable(),
    usage: MessageUsage.nullable(),
    createdAt: z.string(),
  })
  .meta({ id: 'Message' });
export type Message = z.infer<typeof Message>;

export const MessageList = listEnvelope(Message).meta({ id: 'MessageList' });
export const MessageListQuery = listQuery({});

/**
 * What appendMessage stores (platform/conversations): checked there, so the assistant cannot
 * store a malformed turn. Not a request body of any endpoint.
 */
export const MessageInput = z.strictObject({
  role: z.enum(MESSAGE_ROLES),
  content: text(CONVERSATION_LIMITS.contentMax),
  artifacts: z
    .array(
      ChatArtifact.extend({
        title: text(1000),
        openUrl: line(2048).optional(),
        data: z.record(z.string(), z.unknown()).optional(),
      }),
    )
    .max(CONVERSATION_LIMITS.artifactsMax)
    .default([]),
  engine: MessageEngine.nullable().default(null),
  usage: MessageUsage.nullable().default(null),
});
export type MessageInput = z.input<typeof MessageInput>;
