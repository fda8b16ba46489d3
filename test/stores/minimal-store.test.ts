// The conformance suite on a store that implements only the required contract (test/fixtures/minimal-store.ts):
// every test of the required methods passes, with threadkeep's fallbacks for the rest, and every
// test of a capability it lacks skips, saying which.
import { runStoreConformance } from "../../src/testing/index.js";
import { createMapStore } from "../fixtures/minimal-store.js";

runStoreConformance("map (required methods only)", createMapStore);
