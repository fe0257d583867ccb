/**
 * The web embed (GET /api/v1/persona-embed.js): a text chat box wired to the realtime engine.
 * The page's server starts the conversation with its own key and writes the token into the tag;
 * the script never sees an API key. Plain ES2017, no dependencies.
 */
export const EMBED_SCRIPT = `(function () {
  var tag = document.currentScript;
  if (!tag) return;
  var url = tag.getAttribute('data-realtime-url');
  var token = tag.getAttribute('data-token');
  if (!url || !token) return;
  var box = document.createElement('div');
  box.setAttribute('style', 'position:fixed;right:16px;bottom:16px;width:320px;font:14px sans-serif;background:#fff;border:1px solid #ccc;border-radius:8px;padding:8px;z-index:2147483647');
  var log = document.createElement('div');
  log.setAttribute('style', 'max-height:240px;overflow:auto;margin-bottom:6px');
  var input = document.createElement('input');
  input.setAttribute('style', 'width:100%;box-sizing:border-box');
  input.placeholder = 'Type a message';
  box.appendChild(log);
  box.appendChild(input);
  document.body.appendChild(box);
  var say = function (who, text) {
    var p = document.createElement('p');
    p.textContent = who + ': ' + text;
    log.appendChild(p);
    log.scrollTop = log.scrollHeight;
  };
  var ws = new WebSocket(url + '?token=' + encodeURIComponent(token));
  ws.binaryType = 'arraybuffer';
  ws.onmessage = function (m) {
    if (typeof m.data !== 'string') return;
    var e = JSON.parse(m.data);
    if (e.type === 'assistant.text' && typeof e.text === 'string') say('Assistant', e.text);
    if (e.type === 'error') say('Error', e.message);
  };
  ws.onclose = function () { input.disabled = true; };
  input.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter' || !input.value.trim()) return;
    ws.send(JSON.stringify({ type: 'input_text', text: input.value.trim() }));
    say('You', input.value.trim());
    input.value = '';
  });
})();
`;
