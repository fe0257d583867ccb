import type { VideoRequest } from '../../contracts/videos';
import { toEnvelope } from '../jobs/jobs';
import type { AuthAccount } from '../accounts/accounts';
import type { Runtime } from '../runtime';
import { assertFetchable } from '../infra/ssrf';
import { resolveVideoPlan } from './videos.rules';

/**
 * POST /videos: resolve the plan (tier, shape, resolution, length, references, notes), refuse
 * private reference URLs, charge the tier's price (premium several times standard), record the
 * `vid_` job with the resolved plan as its input, publish it, answer 202 with the notes.
 */
export function createVideosService(rt: Pick<Runtime, 'jobs' | 'config'>) {
  return {
    async dispatch(input: { account: AuthAccount; requestId: string; jobId?: string; request: VideoRequest }) {
      const { account } = input;
      const { creditOperation, ...plan } = resolveVideoPlan(input.request, account.features);
      const loop = rt.config.ALLOW_LOOPBACK_URLS;
      const urls = [...(plan.openingFrameUrl ? [plan.openingFrameUrl] : []), ...plan.referenceImageUrls];
      const field = (u: string) => {
        const i = input.request.referenceImageUrls?.indexOf(u) ?? -1;
        return input.request.referenceImageUrl === u || i < 0 ? 'referenceImageUrl' : `referenceImageUrls.${i}`;
      };
      for (const u of urls) await assertFetchable(u, field(u), { allowLoopback: loop });

      const { job, charged } = await rt.jobs.accept({
        accountId: account._id,
        requestId: input.requestId,
        jobId: input.jobId,
        type: 'video',
        operation: creditOperation,
        input: plan,
        notes: plan.notes,
      });
      return { envelope: { ...toEnvelope(job), notes: plan.notes }, charged };
    },
  };
}
