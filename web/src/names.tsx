import { createContext, type ReactNode, useContext } from "react";
import { useData } from "./context";
import { fetchAllocationNames } from "./api/queries";
import { isNamed, nameOf, NO_NAMES, type Names } from "./lib/names";

// The display names of the org tree's nodes (ADR 0055), loaded once for every screen and again on live updates.
const NamesContext = createContext<Names>(NO_NAMES);

export function NamesProvider({ children }: { children: ReactNode }) {
  const { data } = useData(fetchAllocationNames, []);
  return <NamesContext.Provider value={data ?? NO_NAMES}>{children}</NamesContext.Provider>;
}

export function useNames(): Names {
  return useContext(NamesContext);
}

/** A project (or any node of the tree) as people call it, with its id beside it when the two differ. */
export function ProjectName({ id, strong = false }: { id: string; strong?: boolean }) {
  const names = useNames();
  const name = nameOf(names, id);
  return (
    <span className="project-name" data-project={id}>
      {strong ? <strong>{name}</strong> : name}
      {isNamed(names, id) && <> <code className="muted id">{id}</code></>}
    </span>
  );
}
