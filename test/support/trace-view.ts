import type { ReceivedSpan } from "./otlp-receiver.js";

/*
 * A trace as a waterfall, the way Jaeger's trace view lays one out: a row per span, under its
 * parent, its bar where it ran in the trace's time, its process (service, role, pid) and the
 * attributes a reader looks for first. The tests render what the OTLP receiver got with it.
 */

const html = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** The attributes shown beside a span's name, when it has them. */
const SHOWN = [
  "gen_ai.agent.name",
  "gen_ai.request.model",
  "gen_ai.usage.input_tokens",
  "gen_ai.usage.output_tokens",
  "gen_ai.tool.call.id",
  "troupe.stop.reason",
  "troupe.approval.by",
];

/** The spans in tree order, each with its depth: a parent before its children, siblings by start. */
export function inTreeOrder(spans: readonly ReceivedSpan[]): Array<{ span: ReceivedSpan; depth: number }> {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, ReceivedSpan[]>();
  for (const span of spans) {
    const parent = ids.has(span.parentSpanId) ? span.parentSpanId : "";
    children.set(parent, [...(children.get(parent) ?? []), span]);
  }
  const ordered: Array<{ span: ReceivedSpan; depth: number }> = [];
  const visit = (parent: string, depth: number) => {
    for (const span of (children.get(parent) ?? []).sort(
      (a, b) => a.startMs - b.startMs || a.name.localeCompare(b.name),
    )) {
      ordered.push({ span, depth });
      visit(span.spanId, depth + 1);
    }
  };
  visit("", 0);
  return ordered;
}

export function traceViewHtml(spans: readonly ReceivedSpan[]): string {
  const rows = inTreeOrder(spans);
  const start = Math.min(...spans.map((s) => s.startMs));
  const end = Math.max(...spans.map((s) => s.endMs));
  const width = Math.max(1, end - start);
  const processes = [
    ...new Set(spans.map((s) => `${s.resource["troupe.role"]} · pid ${s.resource["process.pid"] ?? "?"}`)),
  ];
  const colors = ["#3b82f6", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6"];
  const colorOf = (span: ReceivedSpan) =>
    colors[
      processes.indexOf(`${span.resource["troupe.role"]} · pid ${span.resource["process.pid"] ?? "?"}`) %
        colors.length
    ];
  const body = rows
    .map(({ span, depth }) => {
      const left = ((span.startMs - start) / width) * 100;
      const barWidth = Math.max(0.4, ((span.endMs - span.startMs) / width) * 100);
      const shown = SHOWN.filter((key) => span.attributes[key] !== undefined)
        .map(
          (key) =>
            `<span class="attr">${html(key.replace(/^(gen_ai|troupe)\./, ""))}=${html(String(span.attributes[key]))}</span>`,
        )
        .join(" ");
      return `<div class="row${span.status.code === 2 ? " error" : ""}" data-depth="${depth}" data-span="${html(span.spanId)}">
  <div class="name" style="padding-left:${depth * 16 + 6}px"><b>${html(span.name)}</b> ${shown}</div>
  <div class="lane"><div class="bar" style="left:${left}%;width:${barWidth}%;background:${colorOf(span)}"></div></div>
  <div class="ms">${span.endMs - span.startMs} ms</div>
</div>`;
    })
    .join("\n");
  const legend = processes
    .map(
      (p, i) =>
        `<span class="key"><i style="background:${colors[i % colors.length]}"></i>${html(String(spans[0]?.resource["service.name"]))} · ${html(p)}</span>`,
    )
    .join("");
  return `<!doctype html><html><head><meta charset="utf-8"><title>trace ${html(spans[0]?.traceId ?? "")}</title>
<style>
body{font:13px system-ui,sans-serif;margin:0;color:#111;background:#fff}
header{padding:10px 14px;border-bottom:1px solid #ddd;background:#f6f7f9}
header h1{font-size:15px;margin:0 0 4px}
.key{margin-right:16px;color:#444}.key i{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.row{display:grid;grid-template-columns:44% 50% 6%;border-bottom:1px solid #eee;height:24px;align-items:center}
.row.error b{color:#b91c1c}
.name{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.attr{color:#666;font-size:11px;margin-left:4px}
.lane{position:relative;height:100%}
.bar{position:absolute;top:6px;height:12px;border-radius:2px;min-width:2px}
.ms{text-align:right;padding-right:8px;font-size:11px;color:#555}
</style></head><body>
<header><h1>Trace ${html(spans[0]?.traceId ?? "")}</h1><div>${spans.length} spans · ${width} ms · ${legend}</div></header>
${body}
</body></html>`;
}
