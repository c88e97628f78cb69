import { createContext } from "react";

/** The open thread's id, for the parts that ask the service about a reply. */
export const ThreadIdContext = createContext<string | null>(null);
