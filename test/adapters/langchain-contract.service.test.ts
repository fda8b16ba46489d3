/** `threadkeep/langchain` held to LangChain's chat message history contract on every store (see _langchain-contract.ts). */
import { describe, it } from "vitest";
import { langchainHistoryContract } from "./_langchain-contract.js";
import { useFakeUpstream } from "./_setup.js";
import { ADAPTER_STORES, useStoreMemory } from "./_stores.js";

const upstream = useFakeUpstream();

describe.each(ADAPTER_STORES)(
  "ThreadkeepChatMessageHistory honours LangChain's history contract on the $label store",
  (store) => {
    if (store.skipped) it.skip(store.skipped, () => {});
    else langchainHistoryContract(useStoreMemory(store), upstream);
  },
);
