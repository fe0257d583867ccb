import { expect } from 'chai';
import { FLOWCHART_MAX_EDGES, FLOWCHART_MAX_NODES, FlowchartContent } from '../../contracts/projects';
import {
  DEFAULT_TITLE,
  GRID,
  textToFlowchart,
  type TextToFlowchartResult,
} from '../../workers/engines/extract/flowchart';
import { linesToText } from '../../workers/engines/extract/extract.engine';
import { tsvLines } from '../../workers/engines/extract/ocr.extractor';

/** "from->to(label)" for every edge, with node labels instead of ids. */
const edgesOf = (r: TextToFlowchartResult) => {
  const label = new Map(r.content.nodes.map((n) => [n.id, n.label]));
  return r.content.edges.map((e) => `${label.get(e.from)}->${label.get(e.to)}${e.label ? `(${e.label})` : ''}`);
};
const labelsOf = (r: TextToFlowchartResult, shape?: string) =>
  r.content.nodes.filter((n) => !shape || n.shape === shape).map((n) => n.label);

describe('extract: text to flowchart (text-structure-v1)', () => {
  it('when the text has a heading and numbered steps, then the heading titles a start → steps → end chain laid out top to bottom', () => {
    const r = textToFlowchart({
      text: '# Hiring process\n1. Receive application\n2) Screen the CV\nStep 3: Interview\n(4) Offer',
    });
    expect(r.title).to.equal('Hiring process');
    expect(r.titleSource).to.equal('heading');
    expect(labelsOf(r)).to.deep.equal(['Start', 'Receive application', 'Screen the CV', 'Interview', 'Offer', 'End']);
    expect(r.content.nodes.map((n) => n.shape)).to.deep.equal([
      'start',
      'process',
      'process',
      'process',
      'process',
      'end',
    ]);
    expect(edgesOf(r)).to.deep.equal([
      'Start->Receive application',
      'Receive application->Screen the CV',
      'Screen the CV->Interview',
      'Interview->Offer',
      'Offer->End',
    ]);
    const ys = r.content.nodes.map((n) => n.y!);
    expect(ys).to.deep.equal([...ys].sort((a, b) => a - b));
    expect(new Set(ys).size).to.equal(ys.length);
    expect(new Set(r.content.nodes.map((n) => n.x))).to.deep.equal(new Set([GRID.colWidth]));
    expect(r.content.edges.map((e) => e.id)).to.deep.equal(['e1', 'e2', 'e3', 'e4', 'e5']);
    expect(r.steps).to.equal(4);
    expect(FlowchartContent.safeParse(r.content).success).to.equal(true);
  });

  it('when the text has bullets, then each bullet is a step in order', () => {
    const r = textToFlowchart({
      text: '- Create account\n• Verify email\n* Choose plan\n+ Pay',
      fileName: 'onboarding.pptx',
    });
    expect(labelsOf(r, 'process')).to.deep.equal(['Create account', 'Verify email', 'Choose plan', 'Pay']);
    expect(r.title).to.equal('onboarding');
    expect(r.titleSource).to.equal('fileName');
  });

  it('when a line chains steps with arrows, then each part is a node of the chain', () => {
    const r = textToFlowchart({ text: 'Apply -> Interview → Offer => Start work' });
    expect(edgesOf(r)).to.deep.equal([
      'Start->Apply',
      'Apply->Interview',
      'Interview->Offer',
      'Offer->Start work',
      'Start work->End',
    ]);
    expect(r.title).to.equal(DEFAULT_TITLE);
    expect(r.titleSource).to.equal('default');
  });

  it('when a question is followed by yes: and no: lines, then a decision with labelled edges; a rejecting branch ends the flow, the yes branch goes on', () => {
    const r = textToFlowchart({
      text: '1. Screen the CV\nPasses screening?\nyes: Interview\nno: Reject\n2. Make an offer',
    });
    expect(labelsOf(r, 'decision')).to.deep.equal(['Passes screening?']);
    expect(edgesOf(r)).to.have.members([
      'Start->Screen the CV',
      'Screen the CV->Passes screening?',
      'Passes screening?->Interview(yes)',
      'Passes screening?->Reject(no)',
      'Interview->Make an offer',
      'Make an offer->End',
      'Reject->End',
    ]);
    const byLabel = new Map(r.content.nodes.map((n) => [n.label, n]));
    // The no branch sits in its own column, level with the yes branch.
    expect(byLabel.get('Reject')!.x).to.be.greaterThan(byLabel.get('Interview')!.x!);
    expect(byLabel.get('Reject')!.y).to.equal(byLabel.get('Interview')!.y);
    expect(r.decisions).to.equal(1);
  });

  it('when a question has no branches, then yes leads to the next step and no to the end', () => {
    const r = textToFlowchart({ text: 'Is the form complete?\nSend it' });
    expect(edgesOf(r)).to.have.members([
      'Start->Is the form complete?',
      'Is the form complete?->Send it(yes)',
      'Is the form complete?->End(no)',
      'Send it->End',
    ]);
  });

  it('when a line says "if … then …, otherwise …", then a decision on the condition with both branches joining the next step', () => {
    const r = textToFlowchart({
      text: 'If the invoice is approved then pay it, otherwise ask for changes\nArchive the invoice',
    });
    expect(labelsOf(r, 'decision')).to.deep.equal(['The invoice is approved?']);
    expect(edgesOf(r)).to.have.members([
      'Start->The invoice is approved?',
      'The invoice is approved?->Pay it(yes)',
      'The invoice is approved?->Ask for changes(no)',
      'Pay it->Archive the invoice',
      'Ask for changes->Archive the invoice',
      'Archive the invoice->End',
    ]);
  });

  it('when "if … then" has no else, then no skips ahead to the next step', () => {
    const r = textToFlowchart({ text: 'If the order is large, then call the customer\nShip the order' });
    expect(edgesOf(r)).to.include.members([
      'The order is large?->Call the customer(yes)',
      'The order is large?->Ship the order(no)',
      'Call the customer->Ship the order',
    ]);
  });

  it('when a branch says "go back to step N", then it links back to that step', () => {
    const r = textToFlowchart({ text: '1. Draft\n2. Review\nApproved?\nno: go back to step 1\nyes: Publish' });
    expect(edgesOf(r)).to.include.members(['Approved?->Draft(no)', 'Approved?->Publish(yes)', 'Publish->End']);
  });

  it('when headings split the text into sections, then the first titles the flowchart and later ones are notes beside their section', () => {
    const r = textToFlowchart({
      text: '# Onboarding\n## Account\n- Sign up\n- Verify email\n## Billing\n- Add a card',
    });
    expect(r.title).to.equal('Onboarding');
    const notes = r.content.nodes.filter((n) => n.shape === 'note');
    expect(notes.map((n) => n.label)).to.deep.equal(['Account', 'Billing']);
    const card = r.content.nodes.find((n) => n.label === 'Add a card')!;
    expect(notes[1]!.y).to.equal(card.y);
    expect(notes[1]!.x).to.be.lessThan(card.x!);
    // Notes are not part of the flow.
    expect(r.content.edges.some((e) => notes.some((n) => n.id === e.from || n.id === e.to))).to.equal(false);
  });

  it('when the first line is a short plain line above structured lines, then it is the title', () => {
    const r = textToFlowchart({ text: 'Expense approval\n1. Submit receipt\n2. Manager approves' });
    expect(r.title).to.equal('Expense approval');
    expect(r.titleSource).to.equal('first-line');
    expect(labelsOf(r, 'process')).to.deep.equal(['Submit receipt', 'Manager approves']);
  });

  it('when there is no heading, then the metadata title wins over the file name', () => {
    const r = textToFlowchart({ text: '1. A\n2. B', metadataTitle: 'Release checklist', fileName: 'x.pdf' });
    expect([r.title, r.titleSource]).to.deep.equal(['Release checklist', 'metadata']);
    expect(textToFlowchart({ text: '1. A', fileName: 'dir/Release plan.v2.pdf' }).title).to.equal('Release plan.v2');
  });

  it('when a numbered step wraps onto a lower-case line, then the lines form one step', () => {
    const r = textToFlowchart({ text: '1. Receive the application and check\nthat it is complete\n2. Screen' });
    expect(labelsOf(r, 'process')).to.deep.equal(['Receive the application and check that it is complete', 'Screen']);
  });

  it('when the text says Start and End, then they are the start and end nodes, not steps', () => {
    const r = textToFlowchart({ text: 'Start\n1. Work\nEnd' });
    expect(labelsOf(r)).to.deep.equal(['Start', 'Work', 'End']);
  });

  it('when the same text is converted twice, then the result is identical', () => {
    const text = '# T\n1. a\nOk?\nyes: b -> c\nno: stop\n- d';
    expect(textToFlowchart({ text })).to.deep.equal(textToFlowchart({ text }));
  });

  it('when the text holds more steps than a flowchart may, then it is cut at the limits and says so', () => {
    const text = Array.from(
      { length: 800 },
      (_, i) => `${(i % 900) + 1}. Step ${i}\nDone ${i}?\nyes: Go ${i}\nno: Retry ${i}`,
    ).join('\n');
    const r = textToFlowchart({ text });
    expect(r.truncated).to.equal(true);
    expect(r.notes.join(' ')).to.match(/left out/);
    expect(r.content.nodes.length).to.be.at.most(FLOWCHART_MAX_NODES);
    expect(r.content.edges.length).to.be.at.most(FLOWCHART_MAX_EDGES);
    expect(r.content.nodes.at(-1)!.shape).to.equal('end');
    expect(FlowchartContent.safeParse(r.content).success).to.equal(true);
  });

  it('when labels carry control characters or are very long, then they are cleaned and cut to 500 characters', () => {
    const r = textToFlowchart({ text: `1. a\u0007b\u200bc\n2. ${'x'.repeat(900)}` });
    expect(labelsOf(r, 'process')[0]).to.equal('a b c');
    expect(labelsOf(r, 'process')[1]).to.have.length(500);
    expect(FlowchartContent.safeParse(r.content).success).to.equal(true);
  });

  it('when lines carry type sizes, then clearly larger lines become headings', () => {
    expect(
      linesToText([
        { text: 'Title', size: 24 },
        { text: '1. step one', size: 12 },
        { text: '2. step two', size: 12 },
      ]),
    ).to.equal('# Title\n1. step one\n2. step two');
    expect(
      linesToText([
        { text: 'a', size: 12 },
        { text: 'b', size: 12 },
      ]),
    ).to.equal('a\nb');
  });

  it('when tesseract TSV is read, then words join into lines with their height, and a misread bullet glyph becomes a bullet', () => {
    const head = 'level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext';
    const row = (line: number, word: number, h: number, conf: number, text: string) =>
      `5\t1\t1\t1\t${line}\t${word}\t0\t0\t10\t${h}\t${conf}\t${text}`;
    const { lines, confidence } = tsvLines(
      [
        head,
        row(1, 1, 50, 96, 'Big'),
        row(1, 2, 50, 96, 'title'),
        row(2, 1, 11, 12, '¢'),
        row(2, 2, 28, 95, 'Make'),
        row(2, 3, 28, 95, 'offer'),
      ].join('\n'),
    );
    expect(lines).to.deep.equal([
      { text: 'Big title', size: 50 },
      { text: '- Make offer', size: 28 },
    ]);
    expect(confidence).to.be.closeTo(78.8, 0.1);
  });
});
