import { expect } from 'chai';
import type { OutlineItem } from '../../contracts/presentations';
import { authorLocally, briefSentences } from '../../workers/engines/deck/local.engine';

const SALES_BRIEF = `Q3 sales review for the EMEA team.
We closed $4.2M in new bookings, 18% above plan. Win rate rose to 31% after the pricing change in July.
Enterprise deals now average $120k, up from $85k. Net revenue retention reached 112%.
Churn fell to 2.1% as onboarding moved to a dedicated team. Three logos churned over missing SSO support.
Germany and France drove 60% of new pipeline. We signed our first reseller partnership in the Nordics.
The sales team grew from 14 to 19 reps. Ramp time for new reps dropped to 4 months.
Discounting above 20% now needs VP approval.
Risks: the Q4 pipeline depends on two deals above $500k. A competitor cut prices by 15% in the UK.
Next quarter we will launch the partner portal and hire two solution engineers.`;

const author = (over: Partial<Parameters<typeof authorLocally>[0]> = {}) =>
  authorLocally({ name: 'Quarterly review', brief: SALES_BRIEF, slideCount: 8, companyName: 'Acme', visualStyle: 'illustration', ...over });
const norm = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim();
const allLines = (deck: OutlineItem[]) => deck.flatMap((s) => s.bullets);

describe('slides: the local outline engine (local-outline-v2)', () => {
  it('when a realistic sales brief is outlined, then it has a title slide, an agenda of the section titles, the sections and a summary', () => {
    const deck = author();
    expect(deck).to.have.length(8);
    expect(deck[0]).to.deep.equal({ title: 'Quarterly review', bullets: ['Q3 sales review for the EMEA team', 'Presented by Acme'] });
    expect(deck[1]!.title).to.equal('Agenda');
    const sections = deck.slice(2, -1);
    expect(deck[1]!.bullets).to.deep.equal(sections.map((s) => s.title));
    expect(deck.at(-1)!.title).to.equal('Summary');
    expect(deck.at(-1)!.bullets).to.have.length(sections.length);
    expect(deck.at(-1)!.bullets[0]).to.match(/^Revenue: \$4\.2M/);
    expect(new Set(deck.map((s) => s.title)).size).to.equal(deck.length);
  });

  it('when a brief is outlined, then every sentence of it appears exactly once and no sentence is repeated across slides', () => {
    const deck = author();
    const lines = allLines(deck).map(norm);
    expect(new Set(lines).size).to.equal(lines.length);
    for (const sentence of briefSentences(SALES_BRIEF)) expect(lines.filter((l) => l === norm(sentence)), sentence).to.have.length(1);
  });

  it('when the deck has a name, then no bullet is filler built from it', () => {
    for (const slideCount of [3, 5, 8, 12, 30]) {
      const deck = author({ slideCount, name: 'Quarterly review' });
      for (const b of allLines(deck)) {
        expect(b.toLowerCase(), b).to.not.include('quarterly review');
        expect(b).to.not.match(/^(What .* means for|Where .* stands today|Next steps on)/);
      }
      expect(deck.length).to.be.at.most(slideCount);
    }
  });

  it('when the brief is short, then the deck has fewer slides with real bullets rather than filler', () => {
    const deck = author({ brief: 'We grew revenue 40% in Q2. Churn fell to 3%.', slideCount: 8 });
    expect(deck.map((s) => s.title)).to.deep.equal(['Quarterly review', 'Agenda', 'Revenue', 'Customers', 'Summary']);
    expect(deck[2]!.bullets).to.deep.equal(['We grew revenue 40% in Q2']);
    expect(deck[3]!.bullets).to.deep.equal(['Churn fell to 3%']);
    expect(deck[4]!.bullets).to.deep.equal(['Revenue: 40%', 'Customers: 3%']);
    expect(deck[0]!.bullets).to.deep.equal(['Presented by Acme']);
  });

  it('when the slide count is small, then sections merge rather than sentences being dropped', () => {
    const deck = author({ slideCount: 4 });
    expect(deck).to.have.length(4);
    expect(deck.map((s) => s.title)[0]).to.equal('Quarterly review');
    expect(deck.at(-1)!.title).to.equal('Summary');
    expect(allLines(deck.slice(1, -1)).length).to.equal(briefSentences(SALES_BRIEF).length - 1);
  });

  it('when the brief repeats itself or lists with markers, then each fact is used once, without its marker', () => {
    const deck = author({ brief: '- Churn fell to 3%.\n- Churn fell to 3%.\n* Revenue grew 40%.\n1. Hiring starts in May.', slideCount: 5 });
    const lines = allLines(deck);
    expect(lines.filter((l) => l === 'Churn fell to 3%')).to.have.length(1);
    expect(lines).to.include.members(['Revenue grew 40%', 'Hiring starts in May']);
  });
});
