import { createHash } from 'node:crypto';
import { z } from 'zod';
import { line } from '../../../contracts/common';
import type { ChatArtifact } from '../../../contracts/conversations';
import type { Runtime } from '../../runtime';
import { errorArtifact } from '../execute';
import type { ToolDefinition } from '../tool';

/** Where platform_action sends the user (paths of the web app, made absolute with PUBLIC_BASE_URL). */
export const PLATFORM_ACTIONS = {
  open_drive: { title: 'Open Drive', path: '/drive' },
  open_projects: { title: 'Open projects', path: '/projects' },
  open_billing: { title: 'Open billing', path: '/settings/billing' },
  open_settings: { title: 'Open settings', path: '/settings' },
} as const;
type PlatformAction = keyof typeof PLATFORM_ACTIONS;

const HEX = /^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/;
const FONT_PAIRS = [
  { heading: 'Inter', body: 'Inter' },
  { heading: 'Playfair Display', body: 'Source Sans 3' },
  { heading: 'Montserrat', body: 'Open Sans' },
  { heading: 'Space Grotesk', body: 'IBM Plex Sans' },
  { heading: 'Merriweather', body: 'Lato' },
  { heading: 'Poppins', body: 'Nunito Sans' },
] as const;

function hsl(h: number, s: number, l: number): string {
  const a = (s / 100) * Math.min(l / 100, 1 - l / 100);
  const f = (n: number) => {
    const k = (n + h / 30) % 12;
    const c = l / 100 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(c * 255)
      .toString(16)
      .padStart(2, '0');
  };
  return `#${f(0)}${f(8)}${f(4)}`;
}

const long = (hex: string) =>
  (hex.length === 4 ? `#${hex[1]}${hex[1]}${hex[2]}${hex[2]}${hex[3]}${hex[3]}` : hex).toLowerCase();

/**
 * A palette and a font pair derived from the brand name alone (a hash picks the hue and the
 * fonts), so the same brand always gets the same theme; colours the user gave take the first
 * places (primary, secondary, accent).
 */
export function brandTheme(brand: string, colors: readonly string[] = []) {
  const h = createHash('sha256').update(brand.trim().toLowerCase()).digest();
  const hue = ((h[0]! << 8) | h[1]!) % 360;
  const derived = {
    primary: hsl(hue, 65, 42),
    secondary: hsl((hue + 30) % 360, 55, 55),
    accent: hsl((hue + 180) % 360, 75, 50),
    background: hsl(hue, 30, 97),
    text: hsl(hue, 25, 15),
  };
  const given = colors.map(long);
  const palette = {
    ...derived,
    ...(given[0] ? { primary: given[0] } : {}),
    ...(given[1] ? { secondary: given[1] } : {}),
    ...(given[2] ? { accent: given[2] } : {}),
  };
  return { palette, fonts: FONT_PAIRS[h[2]! % FONT_PAIRS.length]! };
}

/** Free tools without a service behind them: web search (not configured here), brand themes, links into the app. */
export function miscTools(rt: Runtime): ToolDefinition[] {
  const base = rt.config.PUBLIC_BASE_URL;

  const webSearch: ToolDefinition<{ query: string }> = {
    name: 'web_search',
    description: 'Search the public web. Not configured in this deployment: it answers an error saying so.',
    input: z.strictObject({ query: line(500).trim().min(1, { error: 'must not be empty' }) }),
    scope: 'ai',
    spends: [],
    // No search provider is wired into this deployment; an honest error beats made-up results.
    run: async () =>
      errorArtifact(
        'Web search is not configured',
        'web search is not configured in this deployment (no search provider); nothing was searched and nothing was charged',
        { tool: 'web_search', code: 'web_search_not_configured' },
      ),
  };

  const theme: ToolDefinition<{ brand: string; colors?: string[] }> = {
    name: 'brand_theme',
    description:
      'Make a brand theme (colour palette and fonts) for a brand name, optionally starting from given hex colours.',
    input: z.strictObject({
      brand: line(120).trim().min(1, { error: 'must not be empty' }),
      colors: z
        .array(z.string().regex(HEX, { error: 'must be a #rgb or #rrggbb colour' }), {
          error: 'must be an array of colours',
        })
        .max(5, { error: 'must have at most 5 colours' })
        .optional(),
    }),
    scope: 'ai',
    spends: [],
    async run(args): Promise<ChatArtifact> {
      const t = brandTheme(args.brand, args.colors);
      return { type: 'brand_theme', title: `${args.brand} theme`, data: { brand: args.brand, ...t } };
    },
  };

  const platformAction: ToolDefinition<{ action: PlatformAction }> = {
    name: 'platform_action',
    description: 'Give the user a link to a place in the app: their Drive, projects, billing or settings.',
    input: z.strictObject({
      action: z.enum(Object.keys(PLATFORM_ACTIONS) as [PlatformAction, ...PlatformAction[]], {
        error: `must be one of ${Object.keys(PLATFORM_ACTIONS).join(', ')}`,
      }),
    }),
    scope: 'ai',
    spends: [],
    async run(args): Promise<ChatArtifact> {
      const a = PLATFORM_ACTIONS[args.action];
      return { type: 'platform_action', title: a.title, data: { action: args.action, url: `${base}${a.path}` } };
    },
  };

  return [webSearch, theme, platformAction];
}
