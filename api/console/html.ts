/**
 * HTML built from template literals with every interpolated value escaped. Hand-written: the
 * console renders a few pages on the server and a template engine would be a build-free but
 * much larger dependency for one function. Only `Html` values (made by `html` itself or by
 * `trusted` for constant markup) pass through unescaped, so a stored key name such as
 * `<script>` always reaches the page as text.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text made safe for element content and quoted attribute values. */
export const escapeHtml = (s: string): string => s.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);

type Value = Html | string | number | boolean | null | undefined | readonly Value[];

const render = (v: Value): string => {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
};

/** The tagged template: `html\`<td>${name}</td>\`` escapes `name`; arrays are joined; null, undefined and false render nothing. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/** Markup the code itself wrote (the SVG chart's numbers, the stylesheet): never user data. */
export const trusted = (markup: string): Html => new Html(markup);
