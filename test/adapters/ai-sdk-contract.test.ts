/** `threadkeep/ai-sdk` held to the AI SDK's chat persistence pattern on every store (see _ai-sdk-contract.ts). */
import { describe, it } from "vitest";
import { aiSdkChatStoreContract } from "./_ai-sdk-contract.js";
import { ADAPTER_STORES, useStoreMemory } from "./_stores.js";

describe.each(ADAPTER_STORES)("createChatStore honours the AI SDK chat persistence pattern on the $label store", (store) => {
  if (store.skipped) it.skip(store.skipped, () => {});
  else aiSdkChatStoreContract(useStoreMemory(store));
});
