import { expect } from 'chai';
import { niceMax, usageChart } from '../../api/console/console.chart';
import { outputLinks } from '../../api/console/console.views';
import { html, trusted } from '../../api/console/html';

describe('console html and chart', () => {
  it('when values are interpolated, then markup and quotes are escaped and nested html is kept', () => {
    const name = `<img src=x onerror="alert('1')">&\``;
    const out = html`<td title="${name}">${name}${html`<b>${'<i>'}</b>`}${[1, '<', null, false]}${trusted('<br>')}</td>`
      .value;
    expect(out).to.equal(
      '<td title="&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;&#96;">&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;&#96;<b>&lt;i&gt;</b>1&lt;<br></td>',
    );
  });

  it('when a job result holds URLs, then only http(s) ones become output links, named by their field', () => {
    const links = outputLinks({
      audioUrl: 'http://h/a.wav?sig=1',
      files: [{ url: 'https://h/b' }],
      evil: 'javascript:alert(1)',
      n: 3,
    });
    expect(links).to.deep.equal([
      { label: 'audioUrl', url: 'http://h/a.wav?sig=1' },
      { label: 'files[0].url', url: 'https://h/b' },
    ]);
  });

  it('when the chart is drawn, then it has one bar per day, round axis tops, and day labels escaped', () => {
    expect([0, 1, 3, 7, 11, 140].map(niceMax)).to.deep.equal([1, 1, 5, 10, 20, 200]);
    const days = Array.from({ length: 30 }, (_, i) => ({
      day: `2026-11-${String(i + 1).padStart(2, '0')}`,
      requests: i,
      credits: i / 2,
    }));
    const svg = usageChart(days).value;
    expect(svg.match(/<rect class="bar"/g)).to.have.length(30);
    expect(svg).to.contain('<title>2026-11-30: 29 requests, 14.5 credits</title>');
  });
});
