package kube

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// PreviewPage is how many jobs a kind's first page holds: more rows than a terminal shows,
// few enough that the apiserver sends them and the dashboard decodes them in a few
// milliseconds (5,000 jobs are 19 MB of JSON).
const PreviewPage = 200

// preview lists the first page of one kind's jobs and sends it as a JobsPreview. It sends
// nothing when the list fails (the watch's own list reports that) or when the apiserver does
// not say how many jobs follow the page (it leaves remainingItemCount out when it cannot
// count them): a page without its count cannot stand for the whole list.
//
// The page is a consistent read (no resourceVersion), which the apiserver answers from etcd
// or from its watch cache's snapshot, in both cases in key order: namespace, then name, as
// JobLess orders rows. resourceVersion=0 would be cheaper still, but the watch cache then
// ignores the limit and sends every job.
func (c *Client) preview(ctx context.Context, kind string, req func(metav1.ListOptions) *rest.Request) {
	l := &JobList{}
	if err := req(metav1.ListOptions{Limit: PreviewPage}).Do(ctx).Into(l); err != nil {
		return
	}
	p := JobsPreview{Kind: kind, Jobs: l.Items, Total: len(l.Items), More: l.Continue != ""}
	if p.More {
		if l.RemainingItemCount == nil {
			return
		}
		p.Total += int(*l.RemainingItemCount)
	}
	c.feed.Send(p)
}

// JobLess orders job rows as the job list sorts them by name and as the apiserver lists
// them: by namespace and name as its storage keys "namespace/name" compare, bytewise, then by
// kind. The keys' order is not that of (namespace, name) pairs: "a-b/x" comes before "a/x", as
// '-' sorts before '/'. Ordering rows the same way is what lets a kind's first page
// (JobsPreview) be the top of the list.
func JobLess(x, y *Job) bool {
	if c := compareKeys(x.Namespace, x.Name, y.Namespace, y.Name); c != 0 {
		return c < 0
	}
	return x.Kind < y.Kind
}

// compareKeys compares ns1+"/"+n1 with ns2+"/"+n2 without building either.
func compareKeys(ns1, n1, ns2, n2 string) int {
	if ns1 == ns2 {
		return strings.Compare(n1, n2)
	}
	i := 0
	for i < len(ns1) && i < len(ns2) && ns1[i] == ns2[i] {
		i++
	}
	// The keys first differ at byte i: in the namespaces, or where the shorter one ends and
	// its '/' meets the longer one's next byte (a namespace holds no '/').
	if keyByte(ns1, i) < keyByte(ns2, i) {
		return -1
	}
	return 1
}

// keyByte is byte i of ns+"/"+name, for i <= len(ns).
func keyByte(ns string, i int) byte {
	if i < len(ns) {
		return ns[i]
	}
	return '/'
}
