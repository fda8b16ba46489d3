import { describe, expect, it } from "vitest";
import { Cells, gaussian, trainCells, uniform } from "./_kmeans.js";

/** `n` normalised vectors around `centres` random directions (cosine to the centre about 0.7). */
function clustered(n: number, dims: number, centres: number, seed: number): Float32Array {
  const g = gaussian(seed);
  const random = uniform(seed + 1);
  const unit = (v: Float32Array) => {
    const norm = Math.hypot(...v);
    return v.map((x) => x / norm);
  };
  const c = Array.from({ length: centres }, () => unit(Float32Array.from({ length: dims }, g)));
  const out = new Float32Array(n * dims);
  for (let i = 0; i < n; i++) {
    const centre = c[Math.floor(random() * centres)];
    out.set(unit(centre.map((x) => x + g() / Math.sqrt(dims))), i * dims);
  }
  return out;
}

function exactNearest(cells: Cells, v: Float32Array, at: number): number {
  let best = 0;
  for (let c = 1; c < cells.cells; c++) if (cells.score(c, v, at) > cells.score(best, v, at)) best = c;
  return best;
}

describe("trainCells", () => {
  it("trains unit centroids that each vector is near (more cells than clusters: k-means may split one, never merge two)", () => {
    const dims = 32;
    const data = clustered(2000, dims, 8, 3);
    const cells = trainCells(data, dims, { cells: 16, seed: 5 });
    expect(cells.cells).toBe(16);
    for (let c = 0; c < 16; c++)
      expect(Math.hypot(...cells.centroids.subarray(c * dims, (c + 1) * dims))).toBeCloseTo(1, 4);
    // Every vector is far nearer its own centroid than a random direction would be.
    let near = 0;
    for (let i = 0; i < 2000; i++) if (cells.score(cells.nearest(data, i * dims), data, i * dims) > 0.5) near++;
    expect(near / 2000).toBeGreaterThan(0.95);
  });

  it("never trains more cells than sample vectors", () => {
    const data = clustered(5, 8, 2, 1);
    expect(trainCells(data, 8, { cells: 50 }).cells).toBe(5);
  });

  it("shortlists by projection with many cells and still finds the exact nearest cell for nearly every vector", () => {
    const dims = 64;
    const data = clustered(3000, dims, 40, 7);
    const cells = trainCells(data, dims, { cells: 100, iterations: 2 });
    expect(cells.cells).toBe(100);
    let same = 0;
    for (let i = 0; i < 3000; i++) if (cells.nearest(data, i * dims) === exactNearest(cells, data, i * dims)) same++;
    expect(same / 3000).toBeGreaterThan(0.9);
  });

  it("lists the nearest cells best first", () => {
    const dims = 16;
    const data = clustered(500, dims, 10, 11);
    const cells = trainCells(data, dims, { cells: 10 });
    const q = data.subarray(0, dims);
    const order = cells.nearestCells(q, 4);
    expect(order).toHaveLength(4);
    expect(order[0]).toBe(exactNearest(cells, q, 0));
    for (let i = 1; i < order.length; i++)
      expect(cells.score(order[i - 1], q)).toBeGreaterThanOrEqual(cells.score(order[i], q));
  });
});
