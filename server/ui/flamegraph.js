// The flame graph, by concern, each a module of its own (with its tests,
// *.test.js, beside it, run by `make unit`):
//   classify.js  what a frame is (kernel, unnamed, Python...) and its package
//   colors.js    a frame's colour, the diff's scale
//   tree.js      the server's JSON in flat typed arrays; paths, per-function
//                stats, unnamed frames, direct recursion collapsed
//   layout.js    where frames go on the canvas, which one is under a point
//   search.js    names matching the search box, their share
//   diff.js      two trees aligned by path, the table of changes
//   sandwich.js  a function's callers and callees, merged
//   format.js    times and shares as the page shows them
//   render.js    the canvas renderer (FlameGraph)
// This module gathers them for the pages and for scripts that read the
// graph in a page (tests, the benchmark): import from here.
export { KIND, classify, packageOf, isPythonFile, pythonPackageOf } from './classify.js';
export { PY_HUE, colorFor, diffColor } from './colors.js';
export {
    parseTree, nameInfo, classifyAll, childNamed, pathOf, resolvePath, functionStats, unnamedReport, collapseRecursion,
    hasDirectRecursion, UNNAMED_NOTE_SHARE,
} from './tree.js';
export { ROW, visibleFrames, frameAt, frameBox } from './layout.js';
export { matchNames, matchShare } from './search.js';
export { alignDiff, diffTable, diffShares } from './diff.js';
export { sandwich, outermostCalls } from './sandwich.js';
export { fmtTime, fmtPct } from './format.js';
export { FlameGraph } from './render.js';
