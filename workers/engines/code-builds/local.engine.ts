import { readFileSync } from 'node:fs';
import type { CodeEngine, CodeEngineInput, CodeEngineOutput } from './code.engine';

/**
 * local-template-v1: a deterministic, offline engine. It picks an app archetype from the
 * prompt's words (todo list, counter, timer, or a notes list as the fallback) and writes one
 * self-contained HTML file. `react` apps inline React 18's production UMD build, so the file runs
 * with no network. Simple by design; the name says so.
 */
type Kind = 'todo' | 'counter' | 'timer' | 'notes';

let reactBundle: string | undefined;
// React 18.3.1's UMD builds, vendored beside this file (vendor/README.md); the build copies the
// folder next to the compiled code, so the same relative URL finds them in dist/.
const reactScripts = () =>
  (reactBundle ??= ['react.production.min.js', 'react-dom.production.min.js']
    .map((file) => readFileSync(new URL(`./vendor/${file}`, import.meta.url), 'utf8'))
    .map((src) => `<script>${src.replaceAll('</script', '<\\/script')}</script>`)
    .join('\n'));

export function kindOf(prompt: string): Kind {
  const p = prompt.toLowerCase();
  if (/\b(todo|to-do|task|checklist|chores?)\b/.test(p)) return 'todo';
  if (/\b(timer|stopwatch|pomodoro|countdown)\b/.test(p)) return 'timer';
  if (/\b(counter|count|tally|clicker)\b/.test(p)) return 'counter';
  return 'notes';
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
/** A JS string literal that is safe inside a <script> element. */
const jsString = (s: string) => JSON.stringify(s).replaceAll('<', '\\u003c');

const CSS = `body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;color:#1d2330}
h1{font-size:1.6rem}p.lead{color:#555}button{font:inherit;padding:.4rem .9rem;border-radius:.4rem;border:1px solid #888;background:#f4f4f8;cursor:pointer}
input[type=text]{font:inherit;padding:.4rem;width:60%}ul{padding-left:1.2rem}li.done span{text-decoration:line-through;color:#888}
.big{font-size:3rem;font-variant-numeric:tabular-nums;margin:1rem 0}`;

const FEATURES: Record<Kind, string[]> = {
  todo: [
    'Add items from a text field',
    'Tick items done and remove them',
    'Keep the list in localStorage across reloads',
    'Show how many items are left',
  ],
  counter: [
    'Show the current count in large type',
    'Increment, decrement and reset buttons',
    'Keep the count in localStorage',
  ],
  timer: ['Show elapsed time as mm:ss.t', 'Start, pause and reset controls', 'Record laps in a list'],
  notes: ['Add short notes from a text field', 'Filter notes as you type', 'Keep notes in localStorage'],
};

/** Vanilla JS bodies: each renders into #app. */
const VANILLA: Record<Kind, string> = {
  todo: `const KEY='app.todo';let items=JSON.parse(store.getItem(KEY)||'[]');
const app=document.getElementById('app');
function save(){store.setItem(KEY,JSON.stringify(items))}
function render(){app.innerHTML='';const f=document.createElement('form');const i=document.createElement('input');i.type='text';i.placeholder='New item';i.setAttribute('aria-label','New item');
const b=document.createElement('button');b.textContent='Add';f.append(i,' ',b);f.onsubmit=e=>{e.preventDefault();if(!i.value.trim())return;items.push({text:i.value.trim(),done:false});save();render()};
const ul=document.createElement('ul');items.forEach((it,n)=>{const li=document.createElement('li');if(it.done)li.className='done';const c=document.createElement('input');c.type='checkbox';c.checked=it.done;c.onchange=()=>{it.done=c.checked;save();render()};
const s=document.createElement('span');s.textContent=' '+it.text+' ';const x=document.createElement('button');x.textContent='Remove';x.onclick=()=>{items.splice(n,1);save();render()};li.append(c,s,x);ul.append(li)});
const left=document.createElement('p');left.id='left';left.textContent=items.filter(x=>!x.done).length+' left';app.append(f,ul,left);i.focus()}
render();`,
  counter: `const KEY='app.counter';let n=Number(store.getItem(KEY)||0);const app=document.getElementById('app');
function render(){app.innerHTML='';const d=document.createElement('div');d.className='big';d.id='count';d.textContent=String(n);
const mk=(t,f)=>{const b=document.createElement('button');b.textContent=t;b.onclick=()=>{f();store.setItem(KEY,String(n));render()};return b};
app.append(d,mk('−',()=>n--),' ',mk('+',()=>n++),' ',mk('Reset',()=>n=0))}
render();`,
  timer: `const app=document.getElementById('app');let start=0,acc=0,run=false,laps=[],tick;
const fmt=ms=>{const t=Math.floor(ms/100);const s=Math.floor(t/10);return String(Math.floor(s/60)).padStart(2,'0')+':'+String(s%60).padStart(2,'0')+'.'+(t%10)};
const now=()=>acc+(run?Date.now()-start:0);
function render(){app.innerHTML='';const d=document.createElement('div');d.className='big';d.id='time';d.textContent=fmt(now());
const mk=(t,f)=>{const b=document.createElement('button');b.textContent=t;b.onclick=()=>{f();render()};return b};
const ul=document.createElement('ul');laps.forEach(l=>{const li=document.createElement('li');li.textContent=fmt(l);ul.append(li)});
app.append(d,mk(run?'Pause':'Start',()=>{if(run){acc+=Date.now()-start;run=false;clearInterval(tick)}else{start=Date.now();run=true;tick=setInterval(()=>{document.getElementById('time').textContent=fmt(now())},100)}}),' ',
mk('Lap',()=>laps.push(now())),' ',mk('Reset',()=>{acc=0;start=Date.now();laps=[]}),ul)}
render();`,
  notes: `const KEY='app.notes';let notes=JSON.parse(store.getItem(KEY)||'[]'),q='';const app=document.getElementById('app');
function render(){app.innerHTML='';const f=document.createElement('form');const i=document.createElement('input');i.type='text';i.placeholder='Write a note';
const b=document.createElement('button');b.textContent='Add';f.append(i,' ',b);f.onsubmit=e=>{e.preventDefault();if(!i.value.trim())return;notes.unshift(i.value.trim());store.setItem(KEY,JSON.stringify(notes));render()};
const s=document.createElement('input');s.type='text';s.placeholder='Filter';s.value=q;s.oninput=()=>{q=s.value;list()};const ul=document.createElement('ul');
function list(){ul.innerHTML='';notes.filter(n=>n.toLowerCase().includes(q.toLowerCase())).forEach(n=>{const li=document.createElement('li');li.textContent=n;ul.append(li)})}
list();app.append(f,s,ul)}
render();`,
};

/** React bodies (React.createElement, no build step). */
const REACT: Record<Kind, string> = {
  todo: `function App(){const [items,setItems]=useStored('app.todo',[]);const [text,setText]=React.useState('');
const add=e=>{e.preventDefault();if(!text.trim())return;setItems([...items,{text:text.trim(),done:false}]);setText('')};
return h('div',null,h('form',{onSubmit:add},h('input',{type:'text',value:text,placeholder:'New item','aria-label':'New item',onChange:e=>setText(e.target.value)}),' ',h('button',null,'Add')),
h('ul',null,items.map((it,n)=>h('li',{key:n,className:it.done?'done':''},h('input',{type:'checkbox',checked:it.done,onChange:()=>setItems(items.map((x,m)=>m===n?{...x,done:!x.done}:x))}),h('span',null,' '+it.text+' '),
h('button',{onClick:()=>setItems(items.filter((_,m)=>m!==n))},'Remove')))),h('p',{id:'left'},items.filter(x=>!x.done).length+' left'))}`,
  counter: `function App(){const [n,setN]=useStored('app.counter',0);
return h('div',null,h('div',{className:'big',id:'count'},String(n)),h('button',{onClick:()=>setN(n-1)},'−'),' ',h('button',{onClick:()=>setN(n+1)},'+'),' ',h('button',{onClick:()=>setN(0)},'Reset'))}`,
  timer: `function App(){const [acc,setAcc]=React.useState(0),[start,setStart]=React.useState(0),[run,setRun]=React.useState(false),[laps,setLaps]=React.useState([]),[,tick]=React.useState(0);
React.useEffect(()=>{if(!run)return;const t=setInterval(()=>tick(x=>x+1),100);return()=>clearInterval(t)},[run]);
const now=acc+(run?Date.now()-start:0);const fmt=ms=>{const t=Math.floor(ms/100);const s=Math.floor(t/10);return String(Math.floor(s/60)).padStart(2,'0')+':'+String(s%60).padStart(2,'0')+'.'+(t%10)};
return h('div',null,h('div',{className:'big',id:'time'},fmt(now)),h('button',{onClick:()=>{if(run){setAcc(now);setRun(false)}else{setStart(Date.now());setRun(true)}}},run?'Pause':'Start'),' ',
h('button',{onClick:()=>setLaps([...laps,now])},'Lap'),' ',h('button',{onClick:()=>{setAcc(0);setStart(Date.now());setLaps([])}},'Reset'),h('ul',null,laps.map((l,i)=>h('li',{key:i},fmt(l)))))}`,
  notes: `function App(){const [notes,setNotes]=useStored('app.notes',[]);const [text,setText]=React.useState('');const [q,setQ]=React.useState('');
return h('div',null,h('form',{onSubmit:e=>{e.preventDefault();if(!text.trim())return;setNotes([text.trim(),...notes]);setText('')}},h('input',{type:'text',value:text,placeholder:'Write a note',onChange:e=>setText(e.target.value)}),' ',h('button',null,'Add')),
h('input',{type:'text',value:q,placeholder:'Filter',onChange:e=>setQ(e.target.value)}),h('ul',null,notes.filter(n=>n.toLowerCase().includes(q.toLowerCase())).map((n,i)=>h('li',{key:i},n))))}`,
};

/**
 * Storage that survives a sandboxed page: the asset route serves pages with a CSP sandbox (an
 * opaque origin, where localStorage throws), so the apps fall back to memory there.
 */
const STORE_PRELUDE = `const store=(()=>{try{const s=localStorage;s.setItem('__probe','1');s.removeItem('__probe');return s}catch(e){const m={};return{getItem:k=>k in m?m[k]:null,setItem:(k,v)=>{m[k]=String(v)}}}})();`;

const REACT_PRELUDE = `const h=React.createElement;
function useStored(key,initial){const [v,setV]=React.useState(()=>{try{const s=store.getItem(key);return s===null?initial:JSON.parse(s)}catch{return initial}});
React.useEffect(()=>{store.setItem(key,JSON.stringify(v))},[key,v]);return [v,setV]}`;

export function renderApp(input: CodeEngineInput, kind: Kind): string {
  const head = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="local-template-v1 (${kind}, ${input.framework})">
<title>${escapeHtml(input.name)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>${escapeHtml(input.name)}</h1>
<p class="lead">${escapeHtml(input.prompt.slice(0, 400))}</p>
<div id="app"></div>
`;
  if (input.framework === 'react') {
    return `${head}${reactScripts()}
<script>
${STORE_PRELUDE}
${REACT_PRELUDE}
${REACT[kind]}
ReactDOM.createRoot(document.getElementById('app')).render(h(App));
document.title=${jsString(input.name)};
</script>
</body>
</html>
`;
  }
  return `${head}<script>
${STORE_PRELUDE}
${VANILLA[kind]}
</script>
</body>
</html>
`;
}

export function writePlan(input: CodeEngineInput, kind: Kind): string {
  const features = FEATURES[kind];
  return [
    `# Plan: ${input.name}`,
    '',
    '## Goal',
    input.prompt,
    '',
    '## Approach',
    `A single self-contained HTML page (${input.framework === 'react' ? 'React 18, inlined, no build step' : 'plain JavaScript, no dependencies'}), built on the "${kind}" archetype.`,
    '',
    '## Features',
    ...features.map((f) => `- ${f}`),
    '',
    '## Steps',
    '1. Lay out the page: title, a one-line description, and the app container.',
    `2. Implement the ${kind} state and its controls.`,
    '3. Persist state in the browser where it makes sense.',
    '4. Check the page runs offline from a single file.',
    '',
  ].join('\n');
}

export function createLocalCodeEngine(): CodeEngine {
  return {
    name: 'local-template-v1',
    async build(input, ctx): Promise<CodeEngineOutput> {
      const kind = kindOf(input.prompt);
      let plan: string | null = null;
      if (input.planFirst) {
        await ctx.progress('planning', 'Writing the plan');
        plan = writePlan(input, kind);
      }
      await ctx.progress('generating', `Generating a ${input.framework} ${kind} app`);
      const html = renderApp(input, kind);
      return {
        html,
        plan,
        summary: `A ${kind} app in ${input.framework === 'react' ? 'React' : 'plain HTML and JavaScript'}: ${FEATURES[kind].join('; ')}.`,
      };
    },
  };
}
