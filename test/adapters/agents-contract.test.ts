/** `threadkeep/agents` held to the Agents SDK's session contract on every store (see _agents-contract.ts). */
import { afterAll, beforeAll, describe, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { agentsSessionContract } from "./_agents-contract.js";
import { ADAPTER_STORES, useStoreMemory } from "./_stores.js";

const upstream = {} as { fake: FakeUpstream };
beforeAll(async () => {
  upstream.fake = await startFakeUpstream();
});
afterAll(() => upstream.fake?.close());

describe.each(ADAPTER_STORES)("ThreadkeepSession honours the Agents SDK session contract on the $label store", (store) => {
  if (store.skipped) it.skip(store.skipped, () => {});
  else agentsSessionContract(useStoreMemory(store), upstream);
});
