import type { CheckResult } from './index.js';
import {
  buildModel,
  compareProcess,
  compareTokens,
  type FaultWindow,
  type Model,
} from './model.js';
import type { HistoryLine, ResourceLogs } from './types.js';

const LANE_H = 40;
const AXIS_H = 18;
const LABEL_ROW_H = 13;
const BASE_WIDTH = 1400;
const LABEL_W = 150;
/** Room right of the last instant for the labels of faults that start near the end. */
const RIGHT_PAD = 170;
/** Width of one character of the 10 px (bold) labels, generously, for placing them without overlap. */
const CHAR_W = 7;
const HEADER_H = 150;
const ORDER = ['lock', 'unfenced', 'election', 'cron'];

/**
 * A self-contained HTML page (inline CSS, SVG and script; no network assets), for a person:
 * one row per worker process, labelled with its workload (lock, election, cron) and incarnation
 * (w1, w2, … — a killed worker's replacement is a new row), grouped by workload. On each row:
 * its holds, terms and cron runs coloured by token, its writes marked by outcome, its loss
 * signals, its cron claims and skips. A fault aimed at a worker is shaded on that worker's row
 * only; one aimed at the cluster, a member or every worker is shaded across all rows. Every fault
 * has a label (kind and target) in the band above the rows, packed so that no two overlap, and a
 * token is printed on a bar only where it fits. Violations are flagged on their row and listed
 * below. The page is complete without script; the script only adds zoom.
 */
export function renderTimeline(
  history: readonly HistoryLine[],
  logs: ResourceLogs,
  result: CheckResult,
): string {
  const model = buildModel(history);
  const origin = model.startAt;
  const durationMs = Math.max(1, model.endAt - origin);
  const scale = BASE_WIDTH / durationMs;
  const lanes = lanesOf(model);
  const laneOf = new Map(lanes.map((l, i) => [l.process, i]));
  const { rows: labelRows, rowOf } = packFaultLabels(model.faults, origin, scale);
  const bandH = Math.max(1, labelRows) * LABEL_ROW_H + 4;
  const top = AXIS_H + bandH;
  const height = top + lanes.length * LANE_H + 8;
  const colour = tokenColours(model, logs);
  const rel = (at: number): number => at - origin;
  const laneY = (lane: number) => top + lane * LANE_H;
  const shapes: string[] = [];

  for (const [i, lane] of lanes.entries()) {
    shapes.push(
      `<rect class="lane${i % 2 ? ' odd' : ''}" x="0" y="${laneY(i)}" width="100%" height="${LANE_H}"/>`,
    );
    // A rule between workloads: locks, elections, cron.
    if (i > 0 && lanes[i - 1]!.workload !== lane.workload) {
      shapes.push(`<rect class="group" x="0" y="${laneY(i)}" width="100%" height="1"/>`);
    }
  }

  // Fault windows over the lane backgrounds and under everything else.
  for (const fault of model.faults) {
    const t0 = rel(fault.start);
    const t1 = rel(fault.end ?? model.endAt);
    const lane = laneOf.get(fault.target);
    const [y, h] = lane === undefined ? [top, height - top] : [laneY(lane), LANE_H];
    const labelY = AXIS_H + (rowOf.get(fault.id) ?? 0) * LABEL_ROW_H + 10;
    const tip = `${fault.fault} ${fault.id} target=${fault.target || '-'} ${sec(t0)}–${fault.end === undefined ? 'end of run' : sec(t1)}${faultDetail(fault)}`;
    shapes.push(
      `<rect class="fault${lane === undefined ? ' wide' : ''}" data-t0="${t0}" data-t1="${t1}" x="${t0 * scale}" y="${y}" ` +
        `width="${Math.max(2, (t1 - t0) * scale)}" height="${h}"><title>${esc(tip)}</title></rect>`,
      `<rect class="fault-tie" data-t0="${t0}" data-t1="${t0}" x="${t0 * scale}" y="${labelY + 2}" width="1" height="${y - labelY - 2}"/>`,
      `<g class="fault-label" data-t0="${t0}" data-y="${labelY}" transform="translate(${t0 * scale},${labelY})">` +
        `<text x="2" y="0">${esc(faultLabel(fault))}</text><title>${esc(tip)}</title></g>`,
    );
  }

  for (const hold of model.holds) {
    const lane = laneOf.get(hold.process);
    if (lane === undefined) continue;
    const t0 = rel(hold.start);
    const t1 = rel(hold.end);
    const cron = hold.kind === 'cron';
    const y = laneY(lane) + (cron ? 4 : 5);
    const barH = cron ? 12 : 16;
    const what = hold.kind === 'lock' ? 'lock' : hold.kind === 'term' ? 'term' : 'cron run';
    const fire = hold.fireMs === undefined ? '' : ` fire ${new Date(hold.fireMs).toISOString()}`;
    const tip = `${hold.process} ${what} "${hold.name}"${fire} token ${hold.token} ${sec(t0)}–${sec(t1)} (${hold.endReason})`;
    const width = Math.max(1, (t1 - t0) * scale);
    shapes.push(
      `<rect class="hold ${hold.kind}" data-t0="${t0}" data-t1="${t1}" x="${t0 * scale}" y="${y}" width="${width}" ` +
        `height="${barH}" fill="${colour(hold.token)}"><title>${esc(tip)}</title></rect>`,
    );
    const fits = width >= textWidth(hold.token);
    shapes.push(
      `<g class="token-label" data-t0="${t0}" data-t1="${t1}" data-w="${textWidth(hold.token)}" data-y="${y + barH - 4}"` +
        `${fits ? '' : ' style="display:none"'} transform="translate(${t0 * scale},${y + barH - 4})">` +
        `<text x="3" y="0">${esc(hold.token)}</text></g>`,
    );
    if (hold.endReason === 'lost') {
      shapes.push(
        `<g class="mark lost-signal" data-t0="${t1}" data-y="${y + 8}" transform="translate(${t1 * scale},${y + 8})">` +
          `<path d="M0,-6 L5,0 L0,6 L-5,0 Z"/><title>${esc(`${hold.process} lost token ${hold.token} at ${sec(t1)} (${hold.lost?.detail ?? 'lost'})`)}</title></g>`,
      );
    }
  }

  // Cron: each claim (filled) and each skip (hollow, with the reason) at its fire time on the
  // replica's row, so missing and doubled fires show as gaps and pairs.
  for (const line of model.cronEvents) {
    const lane = laneOf.get(line.process);
    if (lane === undefined || line.fireTime === undefined) continue;
    const t = rel(Date.parse(line.fireTime));
    const y = laneY(lane) + 22;
    const claim = line.op === 'cron-claim';
    const tip = `${line.process} ${claim ? `claimed fire ${line.fireTime} (token ${line.token})` : `skipped fire ${line.fireTime}: ${line.reason}`} at ${sec(rel(line.at))}`;
    shapes.push(
      `<g class="mark fire ${claim ? 'claimed' : 'skipped'}" data-t0="${t}" data-y="${y}" transform="translate(${t * scale},${y})">` +
        `<path d="M-3.5,4 L0,-3 L3.5,4 Z"/><title>${esc(tip)}</title></g>`,
    );
  }

  for (const write of model.writes) {
    const lane = laneOf.get(write.process);
    if (lane === undefined) continue;
    const t = rel(write.doneAt ?? write.invokeAt);
    const y = laneY(lane) + 32;
    const tip = `${write.process} write ${write.writeId} to ${write.resource} "${write.name}" token ${write.token}: ${write.outcome}${write.reason ? ` (${write.reason})` : ''}`;
    const glyph =
      write.outcome === 'ok'
        ? '<rect x="-0.5" y="-4" width="1" height="8"/>'
        : write.outcome === 'stale'
          ? '<path d="M-4,-4 L4,4 M-4,4 L4,-4"/>'
          : write.outcome === 'lost'
            ? '<circle r="3.5"/>'
            : '<path d="M-4,4 L0,-4 L4,4 Z"/>';
    shapes.push(
      `<g class="mark write ${write.outcome}" data-t0="${t}" data-y="${y}" transform="translate(${t * scale},${y})">${glyph}<title>${esc(tip)}</title></g>`,
    );
  }

  for (const violation of result.violations) {
    if (violation.at === undefined) continue;
    const t = rel(violation.at);
    const lane = violation.process === undefined ? undefined : laneOf.get(violation.process);
    const y = lane === undefined ? top + 2 : laneY(lane) + 2;
    const tip = `${violation.rule}${violation.kind ? ` ${violation.kind}` : ''}: ${violation.message}`;
    shapes.push(
      `<rect class="violation-line" data-t0="${t}" data-t1="${t}" x="${t * scale}" y="${top}" width="1" height="${height - top}"/>`,
      `<g class="mark violation" data-t0="${t}" data-y="${y}" transform="translate(${t * scale},${y})">` +
        `<path d="M-6,0 L6,0 L0,10 Z"/><title>${esc(tip)}</title></g>`,
    );
  }

  const labels = lanes
    .map(
      (l, i) =>
        `<div class="label${i % 2 ? ' odd' : ''}" style="top:${laneY(i)}px"><span class="wl ${l.workload}">${esc(l.workload)}</span> ${esc(l.process)}</div>`,
    )
    .join('');
  const violationRows = result.violations
    .slice(0, 500)
    .map(
      (v) =>
        `<tr><td>${v.rule}${v.kind ? ` ${esc(v.kind)}` : ''}</td><td>${v.at === undefined ? '' : sec(rel(v.at))}</td><td>${esc(v.process ?? '')}</td><td>${esc(v.message)}</td></tr>`,
    )
    .join('');
  const data = { durationMs, baseWidth: BASE_WIDTH, pad: RIGHT_PAD, axisH: AXIS_H, top, height };
  const page = { width: LABEL_W + BASE_WIDTH + RIGHT_PAD + 10, height: HEADER_H + height + 20 };

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>leasehold fault run — seed ${esc(String(result.report.seed))}</title>
<style>${CSS}</style></head>
<body data-width="${page.width}" data-height="${page.height}">
<header>
<div class="summary">${esc(result.summary)}</div>
<div class="bar">
<span class="verdict ${result.violations.length ? 'bad' : 'good'}">${result.violations.length ? `${result.violations.length} violation(s)` : 'no violations'}</span>
<button id="zoom-out" title="zoom out">−</button><button id="zoom-in" title="zoom in">+</button><button id="zoom-fit" title="fit">fit</button>
<span class="hint">ctrl + wheel zooms; hover for details</span>
</div>
<div class="legend">
<span><i class="sw" style="background:hsl(0,65%,55%)"></i><i class="sw" style="background:hsl(137,65%,55%)"></i><i class="sw" style="background:hsl(275,65%,55%)"></i> lock / term (rounded) / cron run (thin), coloured by token</span>
<span><svg width="12" height="12"><path d="M2.5,10 L6,3 L9.5,10 Z" fill="#2a2"/></svg> cron fire claimed</span>
<span><svg width="12" height="12"><path d="M2.5,10 L6,3 L9.5,10 Z" fill="none" stroke="#888"/></svg> cron fire skipped</span>
<span><svg width="12" height="12"><rect x="5.5" y="2" width="1" height="8" fill="#333"/></svg> write accepted</span>
<span><svg width="12" height="12"><path d="M2,2 L10,10 M2,10 L10,2" stroke="#d00" stroke-width="2"/></svg> write rejected (stale)</span>
<span><svg width="12" height="12"><circle cx="6" cy="6" r="3.5" fill="#f90"/></svg> write refused by the SDK (lost)</span>
<span><svg width="12" height="12"><path d="M2,10 L6,2 L10,10 Z" fill="#83c"/></svg> outcome unknown / failed</span>
<span><svg width="12" height="12"><path d="M6,0 L11,6 L6,12 L1,6 Z" fill="#111"/></svg> loss signal</span>
<span><svg width="12" height="12"><path d="M0,1 L12,1 L6,11 Z" fill="#e00"/></svg> violation</span>
<span><i class="sw faultsw"></i> fault on one worker</span>
<span><i class="sw faultsw wide"></i> fault on the cluster, a member or all workers</span>
</div>
</header>
<main>
<div class="labels" style="height:${height}px">${labels}</div>
<div class="scroll" id="scroll">
<svg id="tl" xmlns="http://www.w3.org/2000/svg" width="${BASE_WIDTH + RIGHT_PAD}" height="${height}">
<g id="axis">${axis(durationMs, scale, height)}</g>
<g id="shapes">${shapes.join('\n')}</g>
</svg>
</div>
</main>
<section class="violations">
<h2>Violations (${result.violations.length})</h2>
${result.violations.length ? `<table><tr><th>rule</th><th>time</th><th>process</th><th>what</th></tr>${violationRows}</table>` : '<p>none</p>'}
</section>
<script>const TIMELINE = ${JSON.stringify(data)};
${SCRIPT}</script>
</body></html>
`;
}

/** The size a screenshot of the page needs to show all of the timeline and nothing more. */
export function pageSize(html: string): { width: number; height: number } {
  const width = Number(/data-width="(\d+(?:\.\d+)?)"/.exec(html)?.[1] ?? 1600);
  const height = Number(/data-height="(\d+(?:\.\d+)?)"/.exec(html)?.[1] ?? 1000);
  return { width: Math.ceil(width), height: Math.ceil(height) };
}

interface Lane {
  process: string;
  workload: string;
}

/** Worker processes grouped by workload (locks, elections, cron), each group by incarnation. */
function lanesOf(model: Model): Lane[] {
  return model.processes
    .filter((p) => p !== 'nemesis' && p !== 'runner')
    .map((process) => ({ process, workload: model.workloadOf.get(process) ?? 'lock' }))
    .sort((a, b) => rank(a.workload) - rank(b.workload) || compareProcess(a.process, b.process));
}

const rank = (workload: string): number => {
  const i = ORDER.indexOf(workload);
  return i === -1 ? ORDER.length : i;
};

const textWidth = (text: string): number => text.length * CHAR_W + 6;

function faultLabel(fault: FaultWindow): string {
  return `${fault.fault} ${fault.target || '-'}`;
}

function faultDetail(fault: FaultWindow): string {
  const d = fault.detail;
  const parts: string[] = [];
  if (d.skewMs !== undefined) parts.push(`skew ${d.skewMs} ms`);
  if (d.delayMs !== undefined) parts.push(`delay ${d.delayMs} ms`);
  if (d.member !== undefined) parts.push(`member ${d.member}`);
  if (d.token !== undefined) parts.push(`token ${d.token}`);
  if (typeof d.detail === 'string') parts.push(d.detail);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

/**
 * Fault labels in rows above the lanes: each label goes into the first row where it does not
 * overlap a label already there (greedy interval packing by start time), so none overprint.
 */
function packFaultLabels(
  faults: FaultWindow[],
  origin: number,
  scale: number,
): { rows: number; rowOf: Map<string, number> } {
  const ends: number[] = [];
  const rowOf = new Map<string, number>();
  for (const fault of [...faults].sort((a, b) => a.start - b.start)) {
    const x0 = (fault.start - origin) * scale;
    const x1 = x0 + textWidth(faultLabel(fault));
    let row = ends.findIndex((end) => end <= x0);
    if (row === -1) row = ends.push(x1) - 1;
    else ends[row] = x1;
    rowOf.set(fault.id, row);
  }
  return { rows: ends.length, rowOf };
}

/** Distinct hues for consecutive tokens (golden-angle steps), stable for a run. */
function tokenColours(model: Model, logs: ResourceLogs): (token: string) => string {
  const tokens = new Set<string>();
  for (const hold of model.holds) tokens.add(hold.token);
  for (const op of model.operations) if (op.token) tokens.add(op.token);
  for (const entries of Object.values(logs)) for (const e of entries) tokens.add(e.token);
  const index = new Map([...tokens].sort(compareTokens).map((t, i) => [t, i]));
  return (token) => {
    const i = index.get(token) ?? 0;
    return `hsl(${Math.round((i * 137.508) % 360)},65%,${i % 2 ? 48 : 58}%)`;
  };
}

function axis(durationMs: number, scale: number, height: number): string {
  const step = niceStep((durationMs / BASE_WIDTH) * 100);
  const out: string[] = [];
  for (let t = 0; t <= durationMs; t += step) {
    const x = t * scale;
    out.push(
      `<line x1="${x}" x2="${x}" y1="12" y2="${height}" class="grid"/><text x="${x + 2}" y="10">${sec(t)}</text>`,
    );
  }
  return out.join('');
}

function niceStep(ms: number): number {
  const steps = [
    10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 30_000, 60_000, 120_000, 300_000,
    600_000,
  ];
  return steps.find((s) => s >= ms) ?? 1_200_000;
}

function sec(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

function esc(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

const CSS = `
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fff}
header{padding:10px 14px;border-bottom:1px solid #ddd;background:#fafafa}
.summary{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap;margin-bottom:6px}
.bar{display:flex;gap:6px;align-items:center;margin-bottom:6px}
.bar button{font-size:13px;min-width:32px}
.hint{color:#777;font-size:12px}
.verdict{font-weight:600;padding:1px 8px;border-radius:3px}
.verdict.good{background:#d8f3dc;color:#1b5e20}.verdict.bad{background:#fdd;color:#b00}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;color:#444}
.legend span{display:inline-flex;align-items:center;gap:4px}
.sw{display:inline-block;width:14px;height:10px;border-radius:2px}
.faultsw{background:rgba(255,170,0,.3);border:1px solid rgba(230,140,0,.7)}.faultsw.wide{background:rgba(90,120,255,.18);border-color:rgba(60,90,220,.6)}
main{display:flex;position:relative}
.labels{position:relative;width:${LABEL_W}px;flex:none;border-right:1px solid #ccc;background:#fff}
.label{position:absolute;left:0;width:100%;height:${LANE_H}px;line-height:${LANE_H}px;padding-left:8px;box-sizing:border-box;font-family:ui-monospace,monospace;font-weight:600;white-space:nowrap}
.label.odd{background:#f6f7f9}
.wl{display:inline-block;min-width:62px;font-weight:400;color:#555}.wl.election{color:#2b55b8}.wl.cron{color:#1b7a3a}.wl.unfenced{color:#b00}
.scroll{overflow-x:auto;flex:1}
svg text{font-size:10px;fill:#555}
.grid{stroke:#e3e3e3;stroke-width:1}
.lane{fill:#fff}.lane.odd{fill:#f6f7f9}.group{fill:#999}
.fault{fill:rgba(255,170,0,.22);stroke:rgba(230,140,0,.6);stroke-width:1}
.fault.wide{fill:rgba(90,120,255,.10);stroke:rgba(60,90,220,.45)}
.fault-tie{fill:rgba(200,120,0,.55)}
.fault-label text{fill:#8a4b00;font-weight:600;font-size:10px}
.hold{stroke:rgba(0,0,0,.35);stroke-width:.5}
.hold.term{rx:6px}
.token-label text{fill:#fff;font-size:10px;font-weight:600;pointer-events:none}
.fire.claimed path{fill:#2a2}.fire.skipped path{fill:none;stroke:#888}
.write.ok rect{fill:#333}
.write.stale path{stroke:#d00;stroke-width:2}
.write.lost circle{fill:#f90}
.write.unknown path,.write.failed path,.write.pending path{fill:#83c}
.lost-signal path{fill:#111}
.violation path{fill:#e00;stroke:#700}
.violation-line{fill:#e00;opacity:.6}
.violations{padding:10px 14px}
.violations table{border-collapse:collapse;font-size:12px}
.violations td,.violations th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
`;

const SCRIPT = `
(function(){
  var svg=document.getElementById('tl'),axis=document.getElementById('axis'),scroll=document.getElementById('scroll');
  var zoom=1,NS='http://www.w3.org/2000/svg';
  var steps=[10,20,50,100,200,500,1000,2000,5000,10000,20000,30000,60000,120000,300000,600000];
  function sec(ms){return (ms/1000).toFixed(ms<10000?2:1)+' s'}
  function layout(anchorT){
    var s=TIMELINE.baseWidth*zoom/TIMELINE.durationMs;
    svg.setAttribute('width',String(TIMELINE.baseWidth*zoom+TIMELINE.pad));
    var els=document.querySelectorAll('[data-t0]');
    for(var i=0;i<els.length;i++){
      var el=els[i],t0=+el.getAttribute('data-t0'),t1=el.getAttribute('data-t1');
      if(el.tagName==='rect'){
        el.setAttribute('x',String(t0*s));
        if(!el.classList.contains('violation-line')&&!el.classList.contains('fault-tie'))el.setAttribute('width',String(Math.max(el.classList.contains('fault')?2:1,(+t1-t0)*s)));
      }else{
        el.setAttribute('transform','translate('+(t0*s)+','+el.getAttribute('data-y')+')');
        if(el.classList.contains('token-label'))el.style.display=((+t1-t0)*s>=+el.getAttribute('data-w'))?'':'none';
      }
    }
    var want=TIMELINE.durationMs/(TIMELINE.baseWidth*zoom)*100,step=steps[steps.length-1];
    for(var k=0;k<steps.length;k++){if(steps[k]>=want){step=steps[k];break}}
    while(axis.firstChild)axis.removeChild(axis.firstChild);
    for(var t=0;t<=TIMELINE.durationMs;t+=step){
      var l=document.createElementNS(NS,'line');l.setAttribute('class','grid');
      l.setAttribute('x1',String(t*s));l.setAttribute('x2',String(t*s));l.setAttribute('y1','12');l.setAttribute('y2',String(TIMELINE.height));
      var tx=document.createElementNS(NS,'text');tx.setAttribute('x',String(t*s+2));tx.setAttribute('y','10');tx.textContent=sec(t);
      axis.appendChild(l);axis.appendChild(tx);
    }
    if(anchorT!==undefined)scroll.scrollLeft=anchorT.t*s-anchorT.px;
  }
  function anchor(px){var s=TIMELINE.baseWidth*zoom/TIMELINE.durationMs;return{t:(scroll.scrollLeft+px)/s,px:px}}
  function setZoom(z,px){var a=anchor(px===undefined?scroll.clientWidth/2:px);zoom=Math.max(1,Math.min(512,z));layout(a)}
  document.getElementById('zoom-in').onclick=function(){setZoom(zoom*2)};
  document.getElementById('zoom-out').onclick=function(){setZoom(zoom/2)};
  document.getElementById('zoom-fit').onclick=function(){setZoom(1)};
  scroll.addEventListener('wheel',function(e){if(!e.ctrlKey)return;e.preventDefault();
    var r=scroll.getBoundingClientRect();setZoom(zoom*(e.deltaY<0?1.25:0.8),e.clientX-r.left)},{passive:false});
  layout();
})();
`;
