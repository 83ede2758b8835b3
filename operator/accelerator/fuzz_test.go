package accelerator

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// yamlErrorPrefix starts every error of a config that is not YAML of Config's shape.
const yamlErrorPrefix = "accelerator config is not valid YAML of the expected shape: "

// fieldError is one line of Validate's error: the resource, the field and the value it quotes,
// and why. Values are %q-quoted, so a line never holds a raw newline or quote.
var fieldError = regexp.MustCompile(`^accelerators\[("(?:[^"\\]|\\.)*")\]` +
	`(?:\.(volumes|envVars)\[(\d+)\]\.(name|hostPath|mountPath) ("(?:[^"\\]|\\.)*"))?: (.+)$`)

// FuzzParse feeds Parse anything. Whatever it gets it must not panic. An error must say why:
// either the YAML is not of the config's shape (and a reason in words follows), or
// every line names a field that is in the input, quoting the value it really holds. A config
// that parses must survive a marshal and parse unchanged (the operator reloads what nodeprobe
// wrote with yaml.Marshal), and must inject into a pod cleanly: every mount read-only and
// backed by the pod volume the config meant for it, every env var there but PATH and LD_LIBRARY_PATH (never set), nothing for a
// container that asks for no accelerator, and a second Inject a no-op.
// Run it with: go test ./operator/accelerator -run '^$' -fuzz '^FuzzParse$' -fuzztime 20s
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		debian,
		before,
		"",
		"accelerators: {}\n",
		"accelerators: null\n",
		"accelerators:\n  nvidia.com/gpu: null\n",
		"accelerators: [",
		"accelerators:\n  nvidia.com/gpu:\n    volume: []\n",
		"accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: lib, hostPath: usr/lib, mountPath: lib}\n    - {name: lib, hostPath: /a, mountPath: /b}\n",
		"accelerators:\n  'nvidia.com/gpu/x':\n    envVars:\n    - {name: '1PATH', value: x}\n",
		`{"accelerators":{"amd.com/gpu":{"volumes":[{"name":"rocm","hostPath":"/opt/rocm","mountPath":"/opt/rocm"}],"envVars":[{"name":"ROCM_PATH","value":"/opt/rocm"}]}}}`,
		// What nodeprobe writes for a node with several resource names: the same volumes under
		// each, which is one pod volume per name.
		"accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: nvidia-libraries, hostPath: /usr/lib/nvidia, mountPath: /usr/local/nvidia/lib64}\n" +
			"  nvidia.com/mig-1g.10gb:\n    volumes:\n    - {name: nvidia-libraries, hostPath: /usr/lib/nvidia, mountPath: /usr/local/nvidia/lib64}\n",
		// Regression: one volume name for two host paths under two resources. It parsed, and
		// the nvidia.com/gpu container was given AMD's /opt/rocm (the pod's one volume "lib").
		crossResourceName,
		// Regression (the test's, not Parse's): a key holding "%!" is quoted back in the
		// error, which is a reason, not a broken format verb.
		"0%!:",
		// Regression: a null key was "unsupported map key of type: %!s(<nil>), key: <nil>, ...".
		"accelerators: {nvidia.com/gpu: {volumes: [{~: x}]}}",
		// Two volumes at one mount path: the first wins in a container.
		"accelerators:\n  nvidia.com/gpu:\n    volumes:\n    - {name: a, hostPath: /a, mountPath: /m}\n    - {name: b, hostPath: /b, mountPath: /m}\n" +
			"    envVars:\n    - {name: X, value: '1'}\n    - {name: X, value: '2'}\n",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			checkParseError(t, data, cfg, err)
			return
		}
		for _, res := range cfg.resources() {
			for _, v := range cfg.Accelerators[res].Volumes {
				if !strings.HasPrefix(v.HostPath, "/") || !strings.HasPrefix(v.MountPath, "/") || v.Name == "" {
					t.Fatalf("%q parsed with volume %+v of %s: its paths must be absolute and it must have a name", data, v, res)
				}
			}
		}

		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal of the config of %q: %v", data, err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("the config of %q does not parse once marshalled: %v\n%s", data, err, out)
		}
		// Semantic: nil and empty lists are one config (omitempty drops the empty ones).
		if !equality.Semantic.DeepEqual(cfg, again) {
			t.Fatalf("the config of %q changes in a marshal and parse:\n%+v\n%+v", data, cfg, again)
		}

		checkInject(t, data, cfg)
	})
}

const crossResourceName = "accelerators:\n  amd.com/gpu:\n    volumes:\n    - {name: lib, hostPath: /opt/rocm, mountPath: /usr/local/lib}\n" +
	"  nvidia.com/gpu:\n    volumes:\n    - {name: lib, hostPath: /usr/lib/nvidia, mountPath: /usr/local/lib}\n"

// A volume name two resources share is one pod volume: it must be one host path, or a
// container that asks for one resource would get the other's driver (FuzzParse found this).
func TestParseRefusesOneVolumeNameForTwoHostPaths(t *testing.T) {
	_, err := Parse([]byte(crossResourceName))
	want := `accelerators["nvidia.com/gpu"].volumes[0].name "lib": accelerators["amd.com/gpu"].volumes[0] already gives this name to hostPath "/opt/rocm"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	// The same name for the same host path, as nodeprobe writes for several resource names.
	same := strings.ReplaceAll(crossResourceName, "/opt/rocm", "/usr/lib/nvidia")
	if _, err := Parse([]byte(same)); err != nil {
		t.Errorf("one volume under two resources: %v", err)
	}
}

// brokenVerb matches what fmt writes for a verb it could not fill: %!s(<nil>), %!d(string=x),
// %!v(MISSING), %!(EXTRA int=1), %!(NOVERB). An error may quote the input's own text, so
// it counts only when the input holds no such run itself.
var brokenVerb = regexp.MustCompile(`%!\w?\((?:MISSING|NOVERB|BADWIDTH|BADPREC|BADINDEX|EXTRA |<nil>|[\w.*\[\]]+=)`)

func brokenVerbIn(msg string, data []byte) bool {
	return brokenVerb.MatchString(msg) && !brokenVerb.Match(data)
}

// checkParseError asserts that err says why data is refused.
func checkParseError(t *testing.T, data []byte, cfg *Config, err error) {
	t.Helper()
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, yamlErrorPrefix); ok {
		// The YAML library's reason must follow, and be words: a format verb gone wrong
		// (%!s(<nil>)) says nothing.
		if strings.TrimSpace(rest) == "" || brokenVerbIn(rest, data) {
			t.Fatalf("%q: the YAML error gives no reason: %q", data, msg)
		}
		return
	}
	// A config that is YAML of the right shape comes back with the error, so that the claims
	// of each line can be checked against what was actually read.
	if cfg == nil {
		t.Fatalf("%q: validation error without the config it is about: %q", data, msg)
	}
	for _, line := range strings.Split(msg, "\n") {
		m := fieldError.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%q: error line %q names no field of the config", data, line)
		}
		res, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("%q: error line %q: resource %s: %v", data, line, m[1], err)
		}
		a, ok := cfg.Accelerators[res]
		if !ok {
			t.Fatalf("%q: error line %q names resource %q, which the config does not have", data, line, res)
		}
		reason := m[6]
		if m[2] == "" {
			if !strings.HasPrefix(reason, "not a resource name") {
				t.Fatalf("%q: error line %q: the resource is named but not what is wrong with it", data, line)
			}
			continue
		}
		i, _ := strconv.Atoi(m[3])
		var actual string
		switch {
		case m[2] == "volumes" && i < len(a.Volumes):
			actual = map[string]string{"name": a.Volumes[i].Name, "hostPath": a.Volumes[i].HostPath, "mountPath": a.Volumes[i].MountPath}[m[4]]
		case m[2] == "envVars" && i < len(a.EnvVars) && m[4] == "name":
			actual = a.EnvVars[i].Name
		default:
			t.Fatalf("%q: error line %q names a field the config does not have", data, line)
		}
		if m[5] != strconv.Quote(actual) {
			t.Fatalf("%q: error line %q quotes %s, the field holds %q", data, line, m[5], actual)
		}
		if strings.HasSuffix(reason, "must be an absolute path") && strings.HasPrefix(actual, "/") {
			t.Fatalf("%q: error line %q: %q is absolute", data, line, actual)
		}
	}
}

// checkInject injects cfg into a pod with a container per resource (alternately by request and
// by limit), one asking for all of them and one asking for none, and checks the result.
func checkInject(t *testing.T, data []byte, cfg *Config) {
	t.Helper()
	one := resource.MustParse("1")
	resources := cfg.resources()
	var spec corev1.PodSpec
	all := corev1.ResourceList{}
	uses := map[string][]string{} // container name -> resources it asks for
	for i, res := range resources {
		list := corev1.ResourceList{corev1.ResourceName(res): one}
		ctr := corev1.Container{Name: fmt.Sprintf("c%d", i)}
		if i%2 == 0 {
			ctr.Resources.Requests = list
		} else {
			ctr.Resources.Limits = list
		}
		spec.Containers = append(spec.Containers, ctr)
		uses[ctr.Name] = []string{res}
		all[corev1.ResourceName(res)] = one
	}
	spec.Containers = append(spec.Containers,
		corev1.Container{Name: "all", Resources: corev1.ResourceRequirements{Limits: all}},
		corev1.Container{Name: "none"})
	uses["all"] = resources

	cfg.Inject(&spec)

	volumes := map[string]string{} // pod volume name -> host path
	for _, v := range spec.Volumes {
		if _, twice := volumes[v.Name]; twice {
			t.Fatalf("%q: pod volume %q added twice", data, v.Name)
		}
		if v.HostPath == nil {
			t.Fatalf("%q: pod volume %+v is not a host path", data, v)
		}
		volumes[v.Name] = v.HostPath.Path
	}
	for _, ctr := range spec.Containers {
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range ctr.VolumeMounts {
			if !m.ReadOnly {
				t.Fatalf("%q: container %s mounts %s writable: a driver's host directory must be read-only", data, ctr.Name, m.MountPath)
			}
			if _, twice := mounts[m.MountPath]; twice {
				t.Fatalf("%q: container %s has two mounts at %s, which the apiserver refuses", data, ctr.Name, m.MountPath)
			}
			mounts[m.MountPath] = m
			host, ok := volumes[m.Name]
			if !ok {
				t.Fatalf("%q: container %s mounts volume %q, which the pod does not have", data, ctr.Name, m.Name)
			}
			// The host directory behind the mount is one the config gives this container at
			// this path: a volume name shared by two resources must not lead to another's.
			if !configMounts(cfg, uses[ctr.Name], m.Name, host, m.MountPath) {
				t.Fatalf("%q: container %s (asks for %q) gets %s at %s through volume %q: no resource it asks for mounts that there", data, ctr.Name, uses[ctr.Name], host, m.MountPath, m.Name)
			}
		}
		env := map[string]bool{}
		for _, e := range ctr.Env {
			if env[e.Name] {
				t.Fatalf("%q: container %s has env var %s twice", data, ctr.Name, e.Name)
			}
			env[e.Name] = true
			if slices.Contains(imageEnv, e.Name) {
				t.Fatalf("%q: container %s got %s, which replaces its image's own", data, ctr.Name, e.Name)
			}
		}
		for _, res := range uses[ctr.Name] {
			a := cfg.Accelerators[res]
			for _, v := range a.Volumes {
				if _, ok := mounts[v.MountPath]; !ok {
					t.Fatalf("%q: container %s asks for %s but has nothing at %s", data, ctr.Name, res, v.MountPath)
				}
			}
			for _, e := range a.EnvVars {
				if !env[e.Name] && !slices.Contains(imageEnv, e.Name) {
					t.Fatalf("%q: container %s asks for %s but has no %s", data, ctr.Name, res, e.Name)
				}
			}
		}
		if uses[ctr.Name] == nil && (len(ctr.VolumeMounts) > 0 || len(ctr.Env) > 0) {
			t.Fatalf("%q: container %s asks for no accelerator and got %+v %+v", data, ctr.Name, ctr.VolumeMounts, ctr.Env)
		}
	}

	before := spec.DeepCopy()
	cfg.Inject(&spec)
	if !equality.Semantic.DeepEqual(before, &spec) {
		t.Fatalf("%q: a second Inject changed the pod", data)
	}
}

// configMounts says whether one of resources has volume name from hostPath at mountPath.
func configMounts(cfg *Config, resources []string, name, hostPath, mountPath string) bool {
	for _, res := range resources {
		for _, v := range cfg.Accelerators[res].Volumes {
			if v.Name == name && v.HostPath == hostPath && v.MountPath == mountPath {
				return true
			}
		}
	}
	return false
}
