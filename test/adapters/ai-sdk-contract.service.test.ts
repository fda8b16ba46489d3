/** `threadkeep/ai-sdk` held to the AI SDK's chat persistence pattern on every store (see _ai-sdk-contract.ts). */
import { describe, it } from "vitest";
import { aiSdkChatStoreContract } from "./_ai-sdk-contract.js";
import { useFakeUpstream } from "./_setup.js";
import { ADAPTER_STORES, useStoreMemory } from "./_stores.js";

const upstream = useFakeUpstream();

describe.each(ADAPTER_STORES)(
  "createChatStore honours the AI SDK chat persistence pattern on the $label store",
  (store) => {
    if (store.skipped) it.skip(store.skipped, () => {});
    else aiSdkChatStoreContract(useStoreMemory(store), upstream);
  },
);
