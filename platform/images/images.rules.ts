import type { AccountFeatures } from '../../contracts/account';
import type { ImageEngineName } from '../../contracts/images';
import type { Plan } from '../../contracts/registry';
import { AppError } from '../infra/errors';

export type ResolvedImageEngine = Exclude<ImageEngineName, 'auto'>;

/**
 * SPEC 2.10 engine rules, as a pure function of (plan, workspace features, requested engine):
 * - default (omitted or `auto`): svc-ultra on paid plans; on Free, svc-creative with a note;
 * - explicit svc-ultra on Free: 403 plan_required;
 * - partner-svc only where the workspace enables partner images; elsewhere the default, with a note;
 * - any other engine as asked.
 * (The gateway refuses Free plans before any route (SPEC 5.4), so over HTTP only the paid paths
 * are reachable; the Free rules are kept here and unit-tested for the product's other callers.)
 */
export function resolveImageEngine(input: {
  plan: Plan;
  features: Pick<AccountFeatures, 'partnerImages'>;
  requested?: ImageEngineName;
}): { engine: ResolvedImageEngine; notes: string[] } {
  const paid = input.plan !== 'free';
  const fallback: ResolvedImageEngine = paid ? 'svc-ultra' : 'svc-creative';
  const freeNote = 'The Free plan renders with svc-creative; svc-ultra, the default on paid plans, needs Pro or Teams.';
  const requested = input.requested ?? 'auto';
  if (requested === 'auto') return { engine: fallback, notes: paid ? [] : [freeNote] };
  if (requested === 'svc-ultra' && !paid)
    throw new AppError('plan_required', 'engine: svc-ultra needs a paid plan (Pro or Teams)');
  if (requested === 'partner-svc' && !input.features.partnerImages) {
    return {
      engine: fallback,
      notes: [
        `partner-svc is not enabled on this workspace; the image was rendered with ${fallback}, the default.`,
        ...(paid ? [] : [freeNote]),
      ],
    };
  }
  return { engine: requested, notes: [] };
}
