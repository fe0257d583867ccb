import { z } from 'zod';
import { CREDIT_OPERATIONS, PLANS, SCOPES } from './registry';

/** Workspace feature switches (SPEC mentions premium video tiers, partner images, proactive audio...). */
export const AccountFeatures = z
  .object({
    premiumVideo: z.boolean().describe('Premium video tiers (cinema, cinema-ultra).'),
    partnerImages: z.boolean().describe('The partner-svc image engine.'),
    backgroundDecks: z.boolean().describe('Decks build in the background (else pending_editor_open).'),
    proactiveAudio: z.boolean().describe('Always-listening live sessions (ambient).'),
    whiteLabel: z.boolean().describe('Hide the answering engine in chat responses.'),
  })
  .meta({ id: 'AccountFeatures' });
export type AccountFeatures = z.infer<typeof AccountFeatures>;

/** GET /account: who the key belongs to. */
export const AccountResponse = z
  .object({
    id: z.string(),
    name: z.string(),
    plan: z.enum(PLANS),
    apiAccess: z.boolean(),
    features: AccountFeatures,
    key: z.object({
      id: z.string(),
      name: z.string(),
      prefix: z.string().describe('First characters of the key, for recognising it; never the whole key.'),
      scopes: z.array(z.enum(SCOPES)),
      createdAt: z.string(),
    }),
    createdAt: z.string(),
  })
  .meta({ id: 'Account' });

/** GET /account/credits: plan and AI credit balance. */
export const CreditsResponse = z
  .object({
    plan: z.enum(PLANS),
    balance: z.number().describe('AI credits left.'),
    prices: z
      .record(z.enum(CREDIT_OPERATIONS), z.number())
      .describe('Credits charged per operation (speech per character).'),
  })
  .meta({ id: 'Credits' });
