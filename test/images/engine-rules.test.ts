import { expect } from 'chai';
import { resolveImageEngine } from '../../platform/images/images.rules';
import { AppError } from '../../platform/infra/errors';

const off = { partnerImages: false };
const on = { partnerImages: true };

describe('images: engine rules (SPEC 2.10, pure function of plan, features, engine)', () => {
  it('when a paid plan omits the engine or sends auto, then svc-ultra with no note', () => {
    for (const plan of ['pro', 'teams'] as const) {
      expect(resolveImageEngine({ plan, features: off })).to.deep.equal({ engine: 'svc-ultra', notes: [] });
      expect(resolveImageEngine({ plan, features: off, requested: 'auto' })).to.deep.equal({
        engine: 'svc-ultra',
        notes: [],
      });
    }
  });

  it('when a Free plan omits the engine, then svc-creative with a note saying so', () => {
    const r = resolveImageEngine({ plan: 'free', features: off });
    expect(r.engine).to.equal('svc-creative');
    expect(r.notes).to.have.length(1);
    expect(r.notes[0]).to.match(/Free plan renders with svc-creative/);
  });

  it('when a Free plan asks for svc-ultra explicitly, then 403', () => {
    let err: unknown;
    try {
      resolveImageEngine({ plan: 'free', features: on, requested: 'svc-ultra' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).status).to.equal(403);
    expect((err as AppError).message).to.match(/^engine: svc-ultra/);
  });

  it('when partner-svc is asked where the workspace enables it, then partner-svc', () => {
    expect(resolveImageEngine({ plan: 'pro', features: on, requested: 'partner-svc' })).to.deep.equal({
      engine: 'partner-svc',
      notes: [],
    });
    expect(resolveImageEngine({ plan: 'free', features: on, requested: 'partner-svc' })).to.deep.equal({
      engine: 'partner-svc',
      notes: [],
    });
  });

  it('when partner-svc is asked elsewhere, then the plan default with a note', () => {
    const paid = resolveImageEngine({ plan: 'teams', features: off, requested: 'partner-svc' });
    expect(paid.engine).to.equal('svc-ultra');
    expect(paid.notes[0]).to.match(/partner-svc is not enabled on this workspace.*svc-ultra/);
    const free = resolveImageEngine({ plan: 'free', features: off, requested: 'partner-svc' });
    expect(free.engine).to.equal('svc-creative');
    expect(free.notes).to.have.length(2);
  });

  it('when another engine is named, then it is served as asked on any plan', () => {
    for (const engine of [
      'svc-creative',
      'svc-imagine',
      'svc-photo',
      'svc-rapid',
      'svc-design',
      'svc-studio',
      'svc-type',
    ] as const) {
      expect(resolveImageEngine({ plan: 'free', features: off, requested: engine })).to.deep.equal({
        engine,
        notes: [],
      });
      expect(resolveImageEngine({ plan: 'pro', features: off, requested: engine })).to.deep.equal({
        engine,
        notes: [],
      });
    }
  });
});
