/** `threadkeep/agents` held to the Agents SDK's session contract on every store (see _agents-contract.ts). */
import { describe, it } from "vitest";
import { agentsSessionContract } from "./_agents-contract.js";
import { useFakeUpstream } from "./_setup.js";
import { ADAPTER_STORES, useStoreMemory } from "./_stores.js";

const upstream = useFakeUpstream();

describe.each(ADAPTER_STORES)(
  "ThreadkeepSession honours the Agents SDK session contract on the $label store",
  (store) => {
    if (store.skipped) it.skip(store.skipped, () => {});
    else agentsSessionContract(useStoreMemory(store), upstream);
  },
);
