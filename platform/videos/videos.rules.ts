import { createHash } from 'node:crypto';
import type { AccountFeatures } from '../../contracts/account';
import type { CreditOperation } from '../../contracts/registry';
import {
  RESOLUTION_LINES,
  VIDEO_RESOLUTIONS,
  VIDEO_TIER_LIMITS,
  type VideoAspectRatio,
  type VideoPlan,
  type VideoRequest,
  type VideoResolution,
  type VideoTier,
} from '../../contracts/videos';

const ratioOf = (ar: VideoAspectRatio) => {
  const [a, b] = ar.split(':').map(Number) as [number, number];
  return a / b;
};

/** The shape among `offered` closest to `ar` (by log ratio; a tie goes to the first offered). */
export function nearestShape(ar: VideoAspectRatio, offered: readonly VideoAspectRatio[]): VideoAspectRatio {
  let best = offered[0]!;
  let bestD = Infinity;
  for (const o of offered) {
    const d = Math.abs(Math.log(ratioOf(ar)) - Math.log(ratioOf(o)));
    if (d < bestD - 1e-9) {
      best = o;
      bestD = d;
    }
  }
  return best;
}

/** Pixel size: the resolution names the short side; both sides even. */
export function frameSize(ar: VideoAspectRatio, res: VideoResolution): { width: number; height: number } {
  const lines = RESOLUTION_LINES[res];
  const r = ratioOf(ar);
  const even = (n: number) => Math.round(n / 2) * 2;
  return r >= 1 ? { width: even(lines * r), height: lines } : { width: lines, height: even(lines / r) };
}

const rank = (r: VideoResolution) => VIDEO_RESOLUTIONS.indexOf(r);

/**
 * SPEC 2.12 as a pure function of (request, workspace features): the tier, shape, resolution,
 * length and references the render will use, and a plain-language note for every knob that was
 * stepped down. Nothing is refused for asking too much and nothing is dropped without a note.
 */
export function resolveVideoPlan(
  req: VideoRequest,
  features: Pick<AccountFeatures, 'premiumVideo'>,
): VideoPlan & { creditOperation: CreditOperation } {
  const notes: string[] = [];
  let tier: VideoTier = req.modelTier ?? 'max';
  if (VIDEO_TIER_LIMITS[tier].premium && !features.premiumVideo) {
    notes.push(`modelTier ${tier} is a premium tier this workspace has not enabled; the video renders on max.`);
    tier = 'max';
  }
  const lim = VIDEO_TIER_LIMITS[tier];

  const asked = req.aspectRatio ?? '16:9';
  let aspectRatio = asked;
  if (!lim.aspectRatios.includes(asked)) {
    aspectRatio = nearestShape(asked, lim.aspectRatios);
    notes.push(
      `aspectRatio ${asked} is not offered on the ${tier} tier (only ${lim.aspectRatios.join(' and ')}); it renders at ${aspectRatio}, the nearest.`,
    );
  }

  let resolution: VideoResolution = lim.defaultResolution;
  let clipSeconds = lim.defaultSeconds;
  if (!lim.premium) {
    if (req.resolution !== undefined && req.resolution !== lim.maxResolution) {
      notes.push(
        `resolution ${req.resolution} applies to premium tiers only; the ${tier} tier always renders ${lim.maxResolution}.`,
      );
    }
    if (req.clipSeconds !== undefined && req.clipSeconds !== lim.defaultSeconds) {
      notes.push(
        `clipSeconds ${req.clipSeconds} applies to premium tiers only; the ${tier} tier renders a fixed clip of about ${lim.defaultSeconds} seconds.`,
      );
    }
  } else {
    resolution = req.resolution ?? lim.defaultResolution;
    if (rank(resolution) > rank(lim.maxResolution)) {
      notes.push(
        `resolution ${resolution} is above what ${tier} reaches; it renders at ${lim.maxResolution}, the tier's ceiling.`,
      );
      resolution = lim.maxResolution;
    }
    clipSeconds = req.clipSeconds ?? lim.defaultSeconds;
    if (clipSeconds > lim.maxSeconds) {
      notes.push(
        `clipSeconds ${clipSeconds} is above what ${tier} reaches; it is clamped to ${lim.maxSeconds}, the tier's longest.`,
      );
      clipSeconds = lim.maxSeconds;
    }
  }

  // referenceImageUrl (the compatibility anchor) goes first when both are given.
  const all = [...(req.referenceImageUrl ? [req.referenceImageUrl] : []), ...(req.referenceImageUrls ?? [])];
  let refs = all;
  if (all.length > lim.referenceBudget) {
    refs = all.slice(0, lim.referenceBudget);
    notes.push(
      `${all.length} reference images exceed the ${tier} tier's budget of ${lim.referenceBudget}; the first ${lim.referenceBudget} ${lim.referenceBudget === 1 ? 'was' : 'were'} kept${refs.length === 1 ? ' and becomes the opening frame' : ''}.`,
    );
  }
  const openingFrameUrl = refs.length === 1 ? refs[0]! : null;

  const { width, height } = frameSize(aspectRatio, resolution);
  return {
    prompt: req.prompt,
    tier,
    aspectRatio,
    resolution,
    width,
    height,
    clipSeconds,
    fps: lim.fps,
    openingFrameUrl,
    referenceImageUrls: openingFrameUrl ? [] : refs,
    notes,
    seed: createHash('sha256').update(req.prompt).digest().readUInt32LE(0) % 1_000_000_000,
    creditOperation: lim.premium ? 'video_premium' : 'video_standard',
  };
}
