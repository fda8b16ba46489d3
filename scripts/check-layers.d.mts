/** The problems of the tree at `srcDir` (and of test/ and bench/ beside it), one line each; none when it holds. */
export function checkLayers(srcDir: string): string[];
