import { expect } from 'chai';
import { listenToEvents } from '../helpers/events';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';

describe('space.failed carries what the job had published', function () {
  this.timeout(30_000);
  let stack: Stack;
  before(async () => {
    stack = await startStack({ env: { ALLOW_LOOPBACK_URLS: 'true' }, workers: false, scheduler: false });
  });
  after(() => stack.stop());

  it('when a space job fails after its preview landed, then space.failed carries the preview asset URLs, and without a preview only the error', async () => {
    const { key } = await stack.createAccount();
    const api = client(stack.baseUrl, key);
    const events = await listenToEvents(stack.config, 'space.*');
    try {
      const withPreview = await api.post('/real-world/spaces', {
        imageUrl: 'http://127.0.0.1:9/room.jpg',
        quality: 'full',
      });
      const bare = await api.post('/real-world/spaces', {
        imageUrl: 'http://127.0.0.1:9/room.jpg',
        quality: 'preview',
      });
      expect([withPreview.status, bare.status]).to.deep.equal([202, 202]);
      const jobs = stack.rt.jobs; // what the space pool calls
      await jobs.claim(withPreview.body.jobId, 'worker-s', 30_000);
      const preview = {
        stage: 'preview',
        panoramaUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/assets/pano.jpg`,
        depthUrl: `${stack.config.PUBLIC_BASE_URL}/api/v1/assets/depth.png`,
        spaceUrl: null,
        posterUrl: null,
      };
      await jobs.progress(withPreview.body.jobId, 'worker-s', {
        rawStatus: 'preview_ready',
        progressMessage: 'Panorama ready',
        result: preview,
      });
      await jobs.fail(withPreview.body.jobId, 'the splat build ran out of memory', { owner: 'worker-s' });
      await jobs.fail(bare.body.jobId, 'the photo could not be read');

      const failed = await events.waitFor(
        (e) => e.routingKey === 'space.failed' && e.body.data.jobId === withPreview.body.jobId,
      );
      expect(failed.body.data).to.include({
        status: 'failed',
        error: 'the splat build ran out of memory',
        stage: 'preview',
        panoramaUrl: preview.panoramaUrl,
        depthUrl: preview.depthUrl,
      });
      expect(failed.body.data).to.not.have.property('spaceUrl'); // null assets are left out
      const plain = await events.waitFor(
        (e) => e.routingKey === 'space.failed' && e.body.data.jobId === bare.body.jobId,
      );
      expect(Object.keys(plain.body.data).sort()).to.deep.equal(['error', 'jobId', 'pollUrl', 'status']);
    } finally {
      await events.close();
    }
  });
});
