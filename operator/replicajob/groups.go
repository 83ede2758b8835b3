package replicajob

import (
	"fmt"
	"slices"
)

// Fields are a framework's API names for a replica group's type and port, for error messages:
// tfReplicaType and tfPort for TfJob.
type Fields struct{ Type, Port string }

// CheckGroups names each replica group field that the CRD refuses but a job stored before a
// rule existed might still carry (a type outside types or used twice, replicas outside 1-10000,
// a port outside 1-65535), and replica (typ, index) when it is none of the job's. A framework
// runs it before building a replica's env, so that no such job starts with a wrong one, and adds
// its own rules. first says where each type's group is.
func CheckGroups(groups []Replica, types []string, fields Fields, typ string, index int) (first map[string]int, errs []error) {
	first = map[string]int{}
	known := false
	for i, r := range groups {
		at := fmt.Sprintf("replicaSpecs[%d]", i)
		if !slices.Contains(types, r.Type) {
			errs = append(errs, fmt.Errorf("%s.%s %q: not one of %v", at, fields.Type, r.Type, types))
		} else if j, twice := first[r.Type]; twice {
			errs = append(errs, fmt.Errorf("%s.%s %s: replicaSpecs[%d] is of this type too; a type has one group", at, fields.Type, r.Type, j))
		} else {
			first[r.Type] = i
		}
		if r.Replicas < 1 || r.Replicas > 10000 {
			errs = append(errs, fmt.Errorf("%s.replicas %d: must be 1 to 10000", at, r.Replicas))
		}
		if r.Port < 1 || r.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s.%s %d: must be 1 to 65535", at, fields.Port, r.Port))
		}
		known = known || (r.Type == typ && index >= 0 && index < int(r.Replicas))
	}
	if !known {
		errs = append(errs, fmt.Errorf("replica %q %d: not one of the job's", typ, index))
	}
	return first, errs
}
