/**
 * The docs the package ships link only to files it ships: a relative link in README.md, CHANGELOG.md
 * or docs/*.md whose target is not in `npm pack`'s list (a decision record, a benchmark detail page,
 * a source file) is a dead link on npmjs.com and in node_modules. Such files are named as paths in the
 * source repository instead.
 */
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * The paths the package ships, as pack.service.test.ts holds `npm pack` to them: the top-level files below,
 * docs/*.md, and the build under dist/ (which no doc links into). Read from the tree, not from
 * `npm pack`, so this test costs milliseconds.
 */
function packedFiles(): string[] {
  const top = ["package.json", "README.md", "LICENSE", "CHANGELOG.md"];
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`);
  return [...top, ...docs];
}

/** The relative link targets of a Markdown text, outside code blocks, without their #anchors. */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  // Images are left out on purpose: the inspector's screenshots stay in the repository (the package
  // ships no PNGs, pack.service.test.ts), and each has alt text that says what it shows.
  const withoutImages = prose.replace(/!\[[^\]]*\]\([^)]*\)/g, "");
  const targets = [...withoutImages.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]);
  return targets
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith("#"))
    .map((t) => decodeURI(t.split("#")[0]));
}

describe("links in the packed docs", () => {
  it("point at files the package ships", () => {
    const files = packedFiles();
    const shipped = new Set(files);
    const dead: string[] = [];
    for (const doc of files.filter((f) => f.endsWith(".md"))) {
      for (const target of relativeLinks(readFileSync(join(ROOT, doc), "utf8"))) {
        const path = normalize(join(dirname(doc), target)).replace(/\/$/, "");
        if (!shipped.has(path) && ![...shipped].some((f) => f.startsWith(`${path}/`))) dead.push(`${doc} -> ${target}`);
      }
    }
    expect(dead).toEqual([]);
  });
});
