import { expect } from 'chai';
import { frameSize, nearestShape, resolveVideoPlan } from '../../platform/videos/videos.rules';
import type { VideoRequest } from '../../contracts/videos';

const on = { premiumVideo: true };
const off = { premiumVideo: false };
const plan = (req: Partial<VideoRequest>, f = on) =>
  resolveVideoPlan({ prompt: 'a drone shot over a coast', ...req }, f);
const urls = (n: number) => Array.from({ length: n }, (_, i) => `https://img.example.com/${i}.png`);

describe('video: plan rules (SPEC 2.12, pure function)', () => {
  it('when only a prompt is sent, then max, 16:9, 1080p (1920x1080), 8 s, standard price, no notes', () => {
    const p = plan({});
    expect(p).to.include({
      tier: 'max',
      aspectRatio: '16:9',
      resolution: '1080p',
      width: 1920,
      height: 1080,
      clipSeconds: 8,
      fps: 24,
      openingFrameUrl: null,
      creditOperation: 'video_standard',
    });
    expect(p.notes).to.deep.equal([]);
  });

  it('when a premium tier is asked where the workspace has not enabled it, then max with a note', () => {
    for (const modelTier of ['cinema', 'cinema-ultra'] as const) {
      const p = plan({ modelTier }, off);
      expect(p.tier).to.equal('max');
      expect(p.creditOperation).to.equal('video_standard');
      expect(p.notes[0]).to.match(
        new RegExp(`modelTier ${modelTier} is a premium tier this workspace has not enabled; the video renders on max`),
      );
    }
  });

  it('when a standard tier gets another shape, then the nearest of 16:9 and 9:16, with a note', () => {
    expect(nearestShape('21:9', ['16:9', '9:16'])).to.equal('16:9');
    expect(nearestShape('4:3', ['16:9', '9:16'])).to.equal('16:9');
    expect(nearestShape('1:1', ['16:9', '9:16'])).to.equal('16:9');
    expect(nearestShape('3:4', ['16:9', '9:16'])).to.equal('9:16');
    const p = plan({ modelTier: 'fast', aspectRatio: '3:4' });
    expect(p).to.include({ aspectRatio: '9:16', width: 1080, height: 1920 });
    expect(p.notes).to.have.length(1);
    expect(p.notes[0]).to.match(/aspectRatio 3:4 is not offered on the fast tier .* renders at 9:16, the nearest/);
    expect(plan({ aspectRatio: '9:16' }).notes).to.deep.equal([]);
  });

  it('when resolution or clipSeconds are asked on a standard tier, then 1080p and 8 s with a note for each', () => {
    const p = plan({ modelTier: 'max', resolution: '4k', clipSeconds: 12 });
    expect(p).to.include({ resolution: '1080p', clipSeconds: 8 });
    expect(p.notes).to.have.length(2);
    expect(p.notes[0]).to.match(/resolution 4k applies to premium tiers only; the max tier always renders 1080p/);
    expect(p.notes[1]).to.match(
      /clipSeconds 12 applies to premium tiers only; the max tier renders a fixed clip of about 8 seconds/,
    );
    expect(plan({ resolution: '1080p', clipSeconds: 8 }).notes).to.deep.equal([]);
  });

  it('when cinema is asked, then every shape, up to 4k and 15 s; beyond 15 clamps with a note', () => {
    const p = plan({ modelTier: 'cinema', aspectRatio: '21:9', resolution: '4k', clipSeconds: 20 });
    expect(p).to.include({
      tier: 'cinema',
      aspectRatio: '21:9',
      resolution: '4k',
      width: 5040,
      height: 2160,
      clipSeconds: 15,
      creditOperation: 'video_premium',
    });
    expect(p.notes).to.have.length(1);
    expect(p.notes[0]).to.match(/clipSeconds 20 is above what cinema reaches; it is clamped to 15/);
    expect(plan({ modelTier: 'cinema' })).to.include({ resolution: '1080p', clipSeconds: 8 });
  });

  it('when cinema-ultra is asked above 720p, then 720p with a note; it reaches 30 s', () => {
    const p = plan({ modelTier: 'cinema-ultra', resolution: '4k', clipSeconds: 30, aspectRatio: '1:1' });
    expect(p).to.include({ resolution: '720p', width: 720, height: 720, clipSeconds: 30 });
    expect(p.notes).to.have.length(1);
    expect(p.notes[0]).to.match(/resolution 4k is above what cinema-ultra reaches; it renders at 720p/);
    expect(plan({ modelTier: 'cinema-ultra' })).to.include({ resolution: '720p' });
  });

  it('when references exceed the tier budget (1 / 9 / 30), then they are trimmed with a note', () => {
    const std = plan({ referenceImageUrls: urls(3) });
    expect(std.openingFrameUrl).to.equal(urls(1)[0]);
    expect(std.referenceImageUrls).to.deep.equal([]);
    expect(std.notes[0]).to.match(
      /3 reference images exceed the max tier's budget of 1; the first 1 was kept and becomes the opening frame/,
    );
    const cinema = plan({ modelTier: 'cinema', referenceImageUrls: urls(12) });
    expect(cinema.referenceImageUrls).to.deep.equal(urls(9));
    expect(cinema.openingFrameUrl).to.equal(null);
    expect(cinema.notes[0]).to.match(
      /12 reference images exceed the cinema tier's budget of 9; the first 9 were kept\.$/,
    );
    const ultra = plan({ modelTier: 'cinema-ultra', referenceImageUrls: urls(30) });
    expect(ultra.referenceImageUrls).to.have.length(30);
    expect(ultra.notes).to.deep.equal([]);
  });

  it('when referenceImageUrl and referenceImageUrls are both given, then referenceImageUrl goes first', () => {
    const p = plan({ referenceImageUrl: 'https://img.example.com/anchor.png', referenceImageUrls: urls(2) });
    expect(p.openingFrameUrl).to.equal('https://img.example.com/anchor.png');
    const c = plan({
      modelTier: 'cinema',
      referenceImageUrl: 'https://img.example.com/anchor.png',
      referenceImageUrls: urls(2),
    });
    expect(c.referenceImageUrls).to.deep.equal(['https://img.example.com/anchor.png', ...urls(2)]);
    const one = plan({ modelTier: 'cinema', referenceImageUrls: urls(1) });
    expect(one.openingFrameUrl).to.equal(urls(1)[0]);
    expect(one.notes).to.deep.equal([]);
  });

  it('when sizes are computed, then the resolution is the short side and both sides are even', () => {
    expect(frameSize('16:9', '4k')).to.deep.equal({ width: 3840, height: 2160 });
    expect(frameSize('9:16', '480p')).to.deep.equal({ width: 480, height: 854 });
    expect(frameSize('4:3', '720p')).to.deep.equal({ width: 960, height: 720 });
  });
});
