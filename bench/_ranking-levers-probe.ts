// The lever probe of issue 35 (in process, aggregate only; LOCOMO=path npx tsx bench/_ranking-levers-probe.ts "wa=0.5,est=2"): kept in git history only, findings in docs/benchmarks/retrieval.md.
import { readFileSync } from "node:fs";
import { readLocomo } from "./_locomo.js";
import { relevanceTerms } from "../src/core/store/relevance.js";

const data = readLocomo(JSON.parse(readFileSync(process.env.LOCOMO ?? "locomo-dev.json", "utf8")));

interface Doc { session: number; idx: number; key: string; terms: string[]; speaker: string; text: string }
interface Conv { docs: Doc[]; df: Map<string, number>; avgdl: number; questions: { text: string; category: number; evidence: Set<string> }[] }

const convs: Conv[] = data.conversations.map((c) => {
  const docs: Doc[] = [];
  for (const s of c.sessions) s.turns.forEach((t, i) => {
    const speaker = /^([^:]{1,40}):/.exec(t.content)?.[1] ?? t.role;
    docs.push({ session: s.number, idx: i, key: t.id, terms: relevanceTerms(t.content), speaker: speaker.toLowerCase(), text: t.content });
  });
  const df = new Map<string, number>();
  let total = 0;
  for (const d of docs) { total += d.terms.length; for (const t of new Set(d.terms)) df.set(t, (df.get(t) ?? 0) + 1); }
  return { docs, df, avgdl: total / docs.length, questions: c.questions.map((q) => ({ text: q.text, category: q.category, evidence: new Set(q.evidence) })) };
});

const K1 = 1.2, B = 0.75;
function idf(c: Conv, t: string) { const n = c.df.get(t) ?? 0; return Math.log(1 + (c.docs.length - n + 0.5) / (n + 0.5)); }
function bm25(c: Conv, d: Doc, q: Map<string, number>): number {
  let s = 0;
  const norm = 1 - B + (B * d.terms.length) / c.avgdl;
  const counts = new Map<string, number>();
  for (const t of d.terms) if (q.has(t)) counts.set(t, (counts.get(t) ?? 0) + 1);
  for (const [t, tf] of counts) s += q.get(t)! * idf(c, t) * tf * (K1 + 1) / (tf + K1 * norm);
  return s;
}

const P = Object.fromEntries((process.argv[2] ?? "").split(",").filter(Boolean).map((kv) => { const [k, v] = kv.split("="); return [k, Number(v)]; }));
const p = (k: string, d: number) => (P[k] ?? d);
const DEPTH = p("depth", 100);
const LIMIT = 10;
const NB = p("nb", 1); // neighbours shown after

function rank(c: Conv, qtext: string): number[] {
  const qterms = new Map([...new Set(relevanceTerms(qtext))].map((t) => [t, 1]));
  const scored = c.docs.map((d, i) => ({ i, s: bm25(c, d, qterms) })).filter((x) => x.s > 0);
  scored.sort((a, b) => b.s - a.s || b.i - a.i);
  const cands = scored.slice(0, DEPTH);
  if (cands.length === 0) return [];
  const max = cands[0].s;
  const base = new Map(cands.map((x) => [x.i, x.s / max]));
  const score = new Map(base);
  const sameSession = (i: number, j: number) => c.docs[j] && c.docs[i].session === c.docs[j].session;
  // A2: window document: BM25 of t's terms plus neighbours' terms at weight wa (true counts, all docs)
  const wa = p("wa", 0);
  const est = p("est", 0);
  let idfq = (t: string) => idf(c, t);
  let avgdl = c.avgdl;
  if (wa && est) {
    // statistics from what core reads: candidates and their neighbours
    const pool = new Set<number>();
    for (const i of base.keys()) for (const j of [i - 1, i, i + 1]) if (j === i || (sameSession(i, j) && !p("noread", 0))) pool.add(j);
    const pdf = new Map<string, number>(); let tot = 0;
    for (const j of pool) { tot += c.docs[j].terms.length; for (const t of new Set(c.docs[j].terms)) if (qterms.has(t)) pdf.set(t, (pdf.get(t) ?? 0) + 1); }
    const N = est === 1 ? c.docs.length : est === 2 ? pool.size : est;
    avgdl = p("estl", 1) ? tot / pool.size : c.avgdl;
    idfq = (t: string) => { const n = pdf.get(t) ?? 0; return Math.log(1 + Math.max(0, N - n + 0.5) / (n + 0.5)); };
  }
  if (wa) {
    const win = new Map<number, number>();
    for (const i of base.keys()) {
      const d = c.docs[i];
      const counts = new Map<string, number>();
      let len = d.terms.length;
      for (const t of d.terms) if (qterms.has(t)) counts.set(t, (counts.get(t) ?? 0) + 1);
      for (const j of [i - 1, i + 1]) {
        if (!sameSession(i, j)) continue;
        if (p("noread", 0) && !base.has(j)) { len += wa * avgdl; continue; }
        len += wa * c.docs[j].terms.length;
        for (const t of c.docs[j].terms) if (qterms.has(t)) counts.set(t, (counts.get(t) ?? 0) + wa);
      }
      const norm = 1 - B + (B * len) / ((1 + 2 * wa) * avgdl);
      let v = 0; for (const [t, tf] of counts) v += idfq(t) * tf * (K1 + 1) / (tf + K1 * norm);
      win.set(i, v);
    }
    const wmax = Math.max(...win.values());
    for (const [i, v] of win) { base.set(i, v / wmax); score.set(i, v / wmax); }
  }
  // A: neighbours
  const na = p("na", 0), nbw = p("nbw", 0), nmode = p("nmode", 0);
  if (na || nbw) for (const i of base.keys()) {
    const prev = sameSession(i, i - 1) ? base.get(i - 1) ?? 0 : 0;
    const next = sameSession(i, i + 1) ? base.get(i + 1) ?? 0 : 0;
    score.set(i, score.get(i)! + (nmode === 0 ? na * next + nbw * prev : na * Math.max(prev, next)));
  }
  // B: session evidence
  const sw = p("sw", 0), stop = p("stop", 3);
  if (sw) {
    const bySession = new Map<number, number[]>();
    for (const [i, s] of base) { const k = c.docs[i].session; (bySession.get(k) ?? bySession.set(k, []).get(k)!).push(s); }
    const sess = new Map([...bySession].map(([k, l]) => [k, l.sort((a, b) => b - a).slice(0, stop).reduce((a, b) => a + b, 0)]));
    const smode = p("smode", 0);
    if (smode === 1) {
      // coverage: sum of idf of distinct query terms present in the session's candidates
      for (const k of bySession.keys()) {
        const present = new Set<string>();
        for (const i of base.keys()) if (c.docs[i].session === k) for (const t of c.docs[i].terms) if (qterms.has(t)) present.add(t);
        sess.set(k, [...present].reduce((a, t) => a + idf(c, t), 0));
      }
    } else if (smode === 2) {
      // coverage, unweighted
      for (const k of bySession.keys()) {
        const present = new Set<string>();
        for (const i of base.keys()) if (c.docs[i].session === k) for (const t of c.docs[i].terms) if (qterms.has(t)) present.add(t);
        sess.set(k, present.size);
      }
    } else if (smode === 3) {
      // session as one document: BM25 with session-level df (saturating tf over the session's candidates)
      for (const k of bySession.keys()) {
        const counts = new Map<string, number>();
        for (const i of base.keys()) if (c.docs[i].session === k) for (const t of c.docs[i].terms) if (qterms.has(t)) counts.set(t, (counts.get(t) ?? 0) + 1);
        let v = 0; for (const [t, tf] of counts) v += idf(c, t) * tf * 2.2 / (tf + 1.2);
        sess.set(k, v);
      }
    }
    const smax = Math.max(...sess.values());
    for (const i of base.keys()) score.set(i, score.get(i)! + sw * sess.get(c.docs[i].session)! / smax);
  }
  // N: names (capitalised query words not first) get a bonus share
  const nw = p("nw", 0);
  if (nw) {
    const words = qtext.split(/\s+/).slice(1).map((w) => w.replace(/[^\p{L}\p{N}]/gu, "")).filter((w) => /^\p{Lu}/u.test(w));
    const speakers = new Set(c.docs.map((d) => d.speaker));
    const names = new Set(words.filter((w) => p("nspk", 0) || !speakers.has(w.toLowerCase())).flatMap((w) => relevanceTerms(w)));
    if (names.size) for (const i of base.keys()) {
      const have = new Set(c.docs[i].terms.filter((t) => names.has(t)));
      score.set(i, score.get(i)! + nw * have.size / names.size);
    }
  }
  // D: speaker
  const spw = p("spw", 0);
  if (spw) {
    const qwords = new Set(qtext.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
    for (const i of base.keys()) if (qwords.has(c.docs[i].speaker)) score.set(i, score.get(i)! + spw);
  }
  // E: proximity
  const pw = p("pw", 0), pwin = p("pwin", 5);
  if (pw) {
    const qs = new Set(qterms.keys());
    for (const i of base.keys()) {
      const pos: [string, number][] = [];
      c.docs[i].terms.forEach((t, k) => { if (qs.has(t)) pos.push([t, k]); });
      let bonus = 0;
      const best = new Map<string, number>();
      for (let a = 0; a < pos.length; a++) for (let b = a + 1; b < pos.length; b++) {
        if (pos[a][0] === pos[b][0]) continue;
        const dist = pos[b][1] - pos[a][1];
        if (dist > pwin) continue;
        const key = [pos[a][0], pos[b][0]].sort().join(" ");
        const v = Math.min(idf(c, pos[a][0]), idf(c, pos[b][0])) / dist;
        if (v > (best.get(key) ?? 0)) best.set(key, v);
      }
      for (const v of best.values()) bonus += v;
      score.set(i, score.get(i)! + pw * bonus / Math.max(1, ...[...qs].map((t) => idf(c, t))));
    }
  }
  // C: PRF (RM3-ish): expansion terms from top fb docs, rescoring all docs with expanded query, interpolated
  const fw = p("fw", 0), fbd = p("fbd", 5), fbt = p("fbt", 10), fpool = p("fpool", 1);
  if (fw) {
    const top = [...base].sort((a, b) => b[1] - a[1]).slice(0, fbd);
    const weights = new Map<string, number>();
    for (const [i, s] of top) {
      const d = c.docs[i];
      const seen = new Map<string, number>();
      for (const t of d.terms) seen.set(t, (seen.get(t) ?? 0) + 1);
      for (const [t, tf] of seen) {
        if (qterms.has(t) || (c.df.get(t) ?? 0) < 2) continue;
        weights.set(t, (weights.get(t) ?? 0) + s * (tf / d.terms.length) * idf(c, t));
      }
    }
    if (p("fmode", 0) === 1) {
      // RM3: P(w|d) weights (no idf), mixed with the original query, then a fresh BM25 over every doc.
      const rm = new Map<string, number>();

      for (const [i, s] of top) {
        const d = c.docs[i];
        for (const t of d.terms) { if ((c.df.get(t) ?? 0) > c.docs.length * p("fdf", 0.1)) continue; rm.set(t, (rm.get(t) ?? 0) + s / d.terms.length); }
      }
      const expt = [...rm].sort((a, b) => b[1] - a[1]).slice(0, fbt);
      const ez = expt.reduce((a, [, w]) => a + w, 0) || 1;
      const nq = new Map<string, number>();
      for (const t of qterms.keys()) nq.set(t, (1 - fw) / qterms.size);
      for (const [t, w] of expt) nq.set(t, (nq.get(t) ?? 0) + fw * w / ez);
      const all = c.docs.map((d, i) => ({ i, s: bm25(c, d, nq) })).filter((x) => x.s > 0).sort((a, b) => b.s - a.s || b.i - a.i);
      return all.slice(0, LIMIT).map((x) => x.i);
    }
    const exp = [...weights].sort((a, b) => b[1] - a[1]).slice(0, fbt);
    const wmax = exp[0]?.[1] ?? 1;
    const eq = new Map(exp.map(([t, w]) => [t, w / wmax]));
    const pool = fpool ? [...base.keys()] : c.docs.map((_, i) => i);
    const es = new Map(pool.map((i) => [i, bm25(c, c.docs[i], eq)]));
    const emax = Math.max(1e-9, ...es.values());
    for (const i of pool) if (es.get(i)! > 0) score.set(i, (score.get(i) ?? 0) + fw * es.get(i)! / emax);
  }
  return [...score].sort((a, b) => b[1] - a[1] || b[0] - a[0]).slice(0, LIMIT).map(([i]) => i);
}

function shown(c: Conv, hits: number[]): string[] {
  const seen = new Set<number>(); const out: string[] = [];
  for (const h of hits) for (let j = h; j <= h + NB; j++) {
    if (!c.docs[j] || c.docs[j].session !== c.docs[h].session || seen.has(j)) continue;
    seen.add(j); out.push(c.docs[j].key);
  }
  return out;
}

const results: boolean[] = [];
const byCat = new Map<number, [number, number]>();
const t0 = performance.now();
for (const c of convs) for (const q of c.questions) {
  const ok = shown(c, rank(c, q.text)).slice(0, 5).some((k) => q.evidence.has(k));
  results.push(ok);
  const e = byCat.get(q.category) ?? [0, 0]; e[0] += ok ? 1 : 0; e[1]++; byCat.set(q.category, e);
}
const ms = performance.now() - t0;
const hit = results.filter(Boolean).length;
let line = `${process.argv[2] ?? "base"}\t${(100 * hit / results.length).toFixed(1)}%\t` + [1, 2, 3, 4].map((k) => (100 * byCat.get(k)![0] / byCat.get(k)![1]).toFixed(1)).join("/");
const basePath = "/tmp/ranking/explore-base.json";
if (process.argv[3] === "save") (await import("node:fs")).writeFileSync(basePath, JSON.stringify(results));
else {
  try {
    const base: boolean[] = JSON.parse(readFileSync(basePath, "utf8"));
    let w = 0, l = 0; results.forEach((r, i) => { if (r && !base[i]) w++; if (!r && base[i]) l++; });
    const z = (w - l) / Math.sqrt(Math.max(1, w + l));
    line += `\t+${w}/-${l} z=${z.toFixed(2)}`;
  } catch { /* no base */ }
}
console.log(line + `\t${ms.toFixed(0)}ms`);
