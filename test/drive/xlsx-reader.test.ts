import { expect } from 'chai';
import JSZip from 'jszip';
import { TooLargeError } from '../../workers/engines/drive/drive-text.engine';
import { createXlsxExtractor, XLSX_MAX_CELLS } from '../../workers/engines/drive/xlsx.extractor';
import { columnOf, dateKindOf, formatSerial, readXlsx } from '../../workers/engines/drive/xlsx-reader';
import { makeXlsx, type XlsxSheet } from './text-documents';

const signal = () => new AbortController().signal;
/** The extractor's text and truncation for a workbook. */
const extract = (bytes: Buffer, opts: { maxChars?: number; maxCells?: number; maxInflatedBytes?: number } = {}) =>
  createXlsxExtractor({ maxCells: opts.maxCells }).extract(bytes, {
    signal: signal(),
    maxChars: opts.maxChars ?? 1_000_000,
    maxInflatedBytes: opts.maxInflatedBytes,
  });
const textOf = async (sheets: XlsxSheet[], opts?: Parameters<typeof makeXlsx>[1]) =>
  (await extract(await makeXlsx(sheets, opts))).text;

/** The workbook with one part's XML rewritten (what another writer would have put there). */
async function editPart(bytes: Buffer, part: string, edit: (xml: string) => string): Promise<Buffer> {
  const zip = await JSZip.loadAsync(bytes);
  zip.file(part, edit(await zip.file(part)!.async('string')));
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE' });
}

const day = (iso: string) => new Date(`${iso}Z`);

describe('Drive text: the XLSX reader (ooxml-xlsx-v1)', () => {
  it('when cells hold shared strings, inline strings and rich text, then each shows its plain text, escapes decoded and phonetic runs left out', async () => {
    const bytes = await makeXlsx([
      {
        name: 'Strings',
        rows: [
          ['shared', { inline: 'inline <one> & "two"' }, { rich: ['Bold ', 'and', ' plain'] }, 'line\nbreak\ttab'],
          ['shared', '  spaced  '],
        ],
      },
    ]);
    const withPhonetic = await editPart(bytes, 'xl/sharedStrings.xml', (xml) =>
      xml.replace(
        '</sst>',
        '<si><r><t>東京</t></r><rPh sb="0" eb="2"><t>トウキョウ</t></rPh><phoneticPr fontId="1"/></si><si><t>a_x000D_b &#8364;&#x41; _x005F_x0041_</t></si></sst>',
      ),
    );
    const withRefs = await editPart(withPhonetic, 'xl/worksheets/sheet1.xml', (xml) =>
      xml.replace('</row></sheetData>', '<c r="C2" t="s"><v>4</v></c><c r="D2" t="s"><v>5</v></c></row></sheetData>'),
    );
    const r = await extract(withRefs);
    expect(r).to.deep.equal({
      text: '# Strings\nshared\tinline <one> & "two"\tBold and plain\tline break tab\nshared\t  spaced  \t東京\ta b €A _x0041_',
      truncated: false,
    });
  });

  it('when cells hold numbers, booleans, errors and formulas, then numbers show as JavaScript prints them, booleans as TRUE/FALSE, errors by code and formulas by their cached value', async () => {
    const text = await textOf([
      {
        name: 'Values',
        rows: [
          [1200, 35.5, -0.25, 0.1 + 0.2, 1e21, 0],
          [true, false, { error: '#DIV/0!' }, { error: '#N/A' }],
          [
            { formula: 'SUM(A1:B1)', value: 1235.5 },
            { formula: 'A1&"x"', value: '1200x' },
            { formula: 'A1>0', value: true },
            { formula: '1/0' },
            { number: 0.125, format: '0.00%' },
            { number: 1234.5, format: '#,##0.00 "days"' },
          ],
        ],
      },
    ]);
    expect(text).to.equal(
      '# Values\n1200\t35.5\t-0.25\t0.30000000000000004\t1e+21\t0\nTRUE\tFALSE\t#DIV/0!\t#N/A\n1235.5\t1200x\tTRUE\t\t0.125\t1234.5',
    );
  });

  it('when numbers carry date and time formats, built-in or custom, then they show as ISO 8601 dates, date-times, times and elapsed times; other formats keep the number', async () => {
    const at = day('2024-03-05T14:30:00');
    const text = await textOf([
      {
        name: 'Dates',
        rows: [
          [
            { date: at },
            { date: at, format: 15 },
            { date: at, format: 17 },
            { date: at, format: 22 },
            { date: at, format: 18 },
            { date: at, format: 21 },
          ],
          [
            { date: at, format: 'yyyy-mm-dd' },
            { date: at, format: 'd mmmm yyyy;@' },
            { date: at, format: '[$-409]mmm d, yyyy h:mm AM/PM' },
            { date: at, format: 'mmmm' },
            { date: at, format: 'hh:mm' },
          ],
          [
            { number: 1.5, format: 46 },
            { number: 1.5, format: '[h]:mm' },
            { date: day('1900-01-01T00:00:00'), format: 14 },
            { date: day('1999-12-31T23:59:59.6'), format: 22 },
          ],
          [
            { number: 45356, format: '"day "0' },
            { number: 45356, format: '[Red]0.00' },
            { number: 45356, format: '0.00E+00' },
            { number: -1, format: 14 },
          ],
        ],
      },
    ]);
    expect(text.split('\n')).to.deep.equal([
      '# Dates',
      '2024-03-05\t2024-03-05\t2024-03-05\t2024-03-05T14:30:00\t14:30:00\t14:30:00',
      '2024-03-05\t2024-03-05\t2024-03-05T14:30:00\t2024-03-05\t14:30:00',
      '36:00:00\t36:00:00\t1900-01-01\t2000-01-01T00:00:00',
      '45356\t45356\t45356\t-1',
    ]);
    // The 1904 date system (Excel for Mac before 2011) counts from 1 January 1904.
    expect(
      await textOf([{ name: 'Mac', rows: [[{ date: at }, { date: at, format: 22 }]] }], { date1904: true }),
    ).to.equal('# Mac\n2024-03-05\t2024-03-05T14:30:00');
  });

  it('when a format code is read, then its first section decides: date, date-time, time, elapsed or not a date', () => {
    const cases: [string, ReturnType<typeof dateKindOf>][] = [
      ['yyyy-mm-dd', 'date'],
      ['dd/mm/yy;@', 'date'],
      ['mmm-yy', 'date'],
      ['m/d/yyyy h:mm', 'datetime'],
      ['h:mm:ss AM/PM', 'time'],
      ['mm:ss.0', 'time'],
      ['[h]:mm:ss', 'elapsed'],
      ['[ss]', 'elapsed'],
      ['General', null],
      ['0.00', null],
      ['#,##0 "days";[Red]-#,##0 "days"', null],
      ['\\d0', null],
      ['_(* #,##0_);_(* (#,##0);_(* "-"_);_(@_)', null],
      ['[$€-407] #,##0.00', null],
      ['@', null],
    ];
    for (const [code, kind] of cases) expect(dateKindOf(code), code).to.equal(kind);
    expect(formatSerial(60, 'date')).to.equal('1900-02-29'); // the day Excel counts and the calendar does not
    expect(formatSerial(61, 'date')).to.equal('1900-03-01');
    expect(formatSerial(0.999999, 'time')).to.equal('00:00:00'); // rounds to the next second, past midnight
    expect(formatSerial(3_000_000, 'date')).to.equal('3000000'); // past 9999-12-31: the number
    expect([
      columnOf('A1'),
      columnOf('Z9'),
      columnOf('AA10'),
      columnOf('XFD1048576'),
      columnOf('$C$5'),
      columnOf(undefined),
    ]).to.deep.equal([1, 26, 27, 16384, 3, null]);
  });

  it('when cells are sparse, then a missing cell keeps its column, empty trailing cells are dropped, rows without values are left out, and cells without a reference follow the one before', async () => {
    const bytes = await makeXlsx([
      {
        name: 'Sparse',
        rows: [
          [null, 'B1', null, 'D1'],
          [],
          [
            'A3',
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            'AA3',
          ],
          [{ inline: '' }, null, 'C4'],
        ],
      },
    ]);
    expect((await extract(bytes)).text).to.equal(`# Sparse\n\tB1\t\tD1\nA3${'\t'.repeat(26)}AA3\n\t\tC4`);
    // Another writer: no cell references after the first, empty styled cells, a row with only an empty cell.
    const unreferenced = await editPart(bytes, 'xl/worksheets/sheet1.xml', (xml) =>
      xml
        .replace('<c r="D1" t="s">', '<c t="s">')
        .replace('<row r="2"></row>', '<row r="2"><c r="A2" s="0"/></row>')
        .replace('<c r="C4" t="s">', '<c r="C4" t="s"/><c t="s">'),
    );
    expect((await extract(unreferenced)).text).to.equal(`# Sparse\n\tB1\tD1\nA3${'\t'.repeat(26)}AA3\n\t\t\tC4`);
  });

  it('when a workbook has several sheets whose parts are numbered in another order, then the sheets come in workbook order with their names', async () => {
    const bytes = await makeXlsx(
      [
        { name: 'Summary & totals', rows: [[{ inline: 'first' }]] },
        { name: 'Empty', rows: [] },
        { name: 'Détails', rows: [[{ inline: 'third' }]] },
      ],
      { reversedParts: true },
    );
    const zip = await JSZip.loadAsync(bytes);
    expect(await zip.file('xl/worksheets/sheet3.xml')!.async('string')).to.contain('first');
    expect((await extract(bytes)).text).to.equal('# Summary & totals\nfirst\n# Empty\n# Détails\nthird');
  });

  it('when the parts use a namespace prefix (x:row, x:c), then the cells are read all the same', async () => {
    const bytes = await makeXlsx([{ name: 'Prefixed', rows: [['a', 2, { inline: 'c' }]] }]);
    const prefixed = await editPart(bytes, 'xl/worksheets/sheet1.xml', (xml) =>
      xml.replace(/<(\/?)(worksheet|sheetData|row|c|v|is|t)([\s>/])/g, '<$1x:$2$3').replace('xmlns="', 'xmlns:x="'),
    );
    expect(await (await JSZip.loadAsync(prefixed)).file('xl/worksheets/sheet1.xml')!.async('string')).to.contain(
      '<x:row r="1"><x:c r="A1" t="s"><x:v>0</x:v></x:c>',
    );
    expect((await extract(prefixed)).text).to.equal('# Prefixed\na\t2\tc');
  });

  it('when a sheet inflates in many chunks, then every row is read whole, rows and multi-byte characters cut at chunk boundaries included', async () => {
    const rows = Array.from({ length: 4000 }, (_, i) => [
      { inline: `row ${i} ${'é✓'.repeat(i % 40)}` },
      i,
      `shared ${i % 7}`,
    ]);
    const bytes = await makeXlsx([{ name: 'Chunks', rows }]);
    const zip = await JSZip.loadAsync(bytes);
    expect((await zip.file('xl/worksheets/sheet1.xml')!.async('uint8array')).length).to.be.above(10 * 16 * 1024); // JSZip hands a part over at most 16 KB at a time
    const expected = ['# Chunks', ...rows.map(([a, b, c]) => `${(a as { inline: string }).inline}\t${b}\t${c}`)].join(
      '\n',
    );
    expect((await extract(bytes)).text).to.equal(expected);
  });

  it('when the text passes maxChars, then reading stops at that row and the text is marked truncated', async () => {
    const rows = Array.from({ length: 5000 }, (_, i) => [`row ${i}`, i]);
    const r = await extract(
      await makeXlsx([
        { name: 'Long', rows },
        { name: 'Never read', rows: [['x']] },
      ]),
      { maxChars: 1000 },
    );
    expect(r.truncated).to.equal(true);
    expect(r.text.length).to.be.within(1001, 1020);
    expect(r.text).to.match(/^# Long\nrow 0\t0\nrow 1\t1\n/);
    expect(r.text).not.to.contain('Never read');
    const whole = await extract(await makeXlsx([{ name: 'Short', rows: rows.slice(0, 3) }]), { maxChars: 1000 });
    expect(whole).to.deep.equal({ text: '# Short\nrow 0\t0\nrow 1\t1\nrow 2\t2', truncated: false });
  });

  it('when the cells read pass the cell limit, then reading stops before that row and the text is marked truncated, at XLSX_MAX_CELLS by default', async () => {
    const rows = Array.from({ length: 10 }, (_, i) => [i, i, i, i]);
    expect(await extract(await makeXlsx([{ name: 'S', rows }]), { maxCells: 9 })).to.deep.equal({
      text: '# S\n0\t0\t0\t0\n1\t1\t1\t1',
      truncated: true,
    });
    expect(await extract(await makeXlsx([{ name: 'S', rows }]), { maxCells: 40 })).to.include({ truncated: false });
    // The real limit: 500 rows of 1,000 cells fill it exactly (all read); one more cell passes it.
    const full = Array.from({ length: XLSX_MAX_CELLS / 1000 }, () => Array.from({ length: 1000 }, () => 7));
    const past = await extract(
      await makeXlsx([
        { name: 'Big', rows: [...full, [7]] },
        { name: 'After', rows: [[1]] },
      ]),
      { maxChars: 1e9, maxInflatedBytes: 64 * 1024 * 1024 },
    );
    expect(past.truncated).to.equal(true);
    expect(past.text.split('\n')).to.have.length(1 + XLSX_MAX_CELLS / 1000);
    expect(past.text).not.to.contain('After');
  });

  it('when a workbook inflates past the limit (a ZIP bomb), then it is refused before any sheet is read', async () => {
    const bytes = await makeXlsx([{ name: 'S', rows: [['nothing']] }]);
    const zip = await JSZip.loadAsync(bytes);
    zip.file(
      'xl/worksheets/sheet1.xml',
      `<worksheet><sheetData>${'<row><c><v>1</v></c></row>'.repeat(400_000)}</sheetData></worksheet>`,
    );
    const bomb = await zip.generateAsync({
      type: 'nodebuffer',
      compression: 'DEFLATE',
      compressionOptions: { level: 9 },
    });
    expect(bomb.length).to.be.below(200 * 1024);
    const err = await extract(bomb, { maxInflatedBytes: 1024 * 1024 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(TooLargeError);
    expect((err as Error).message).to.equal('the document inflates to more than 1 MB');
  });

  it('when the signal aborts, then reading stops with its reason, before the start or between rows', async () => {
    const bytes = await makeXlsx([{ name: 'S', rows: [['a'], ['b'], ['c']] }]);
    const before = new AbortController();
    before.abort(new Error('stopping'));
    const r1 = await createXlsxExtractor()
      .extract(bytes, { signal: before.signal, maxChars: 1000 })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((r1 as Error).message).to.equal('stopping');
    const during = new AbortController();
    const seen: string[][] = [];
    const zip = await JSZip.loadAsync(bytes);
    const r2 = await readXlsx(
      zip,
      {
        sheet: () => true,
        row: (texts) => {
          seen.push(texts);
          during.abort(new Error('time is up'));
        },
      },
      { signal: during.signal, maxPartBytes: 1024 * 1024 },
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect((r2 as Error).message).to.equal('time is up');
    expect(seen).to.deep.equal([['a']]);
  });

  it('when the ZIP holds no workbook, then the reader says so', async () => {
    const zip = new JSZip();
    zip.file('word/document.xml', '<w:document/>');
    const err = await extract(await zip.generateAsync({ type: 'nodebuffer' })).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as Error).message).to.equal('the ZIP holds no xl/workbook.xml; it is not an Excel workbook');
  });
});
