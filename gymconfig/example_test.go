package gymconfig_test

import (
	"fmt"

	"github.com/gymlens/gymlens/gymconfig"
)

// A server process finds itself and its peers in the config dict its
// fleet handed it.
func ExampleLaunchFromEnv() {
	env := map[string]string{
		gymconfig.EnvConfigPath: "my_agent",
		gymconfig.EnvConfigDict: `
policy_model_name: my-model
my_resources:
  resources_servers:
    string_match: {host: 127.0.0.1, port: 14321, domain: knowledge}
my_agent:
  responses_api_agents:
    simple_agent:
      host: 127.0.0.1
      port: 17654
      model: ${policy_model_name}
      resources_server: {type: resources_servers, name: my_resources}
`,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	l, ok, err := gymconfig.LaunchFromEnv(lookup)
	if err != nil || !ok {
		fmt.Println("not launched by a fleet:", err)
		return
	}
	peer, err := l.PeerURL("resources_server")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Self.Type, l.Self.Impl, l.Addr())
	fmt.Println(l.Self.ImplConfig())
	fmt.Println(peer)
	// Output:
	// responses_api_agents simple_agent 127.0.0.1:17654
	// map[model:my-model]
	// http://127.0.0.1:14321
}

func ExampleDict_Resolve() {
	d, err := gymconfig.Parse([]byte(`
base_url: http://127.0.0.1:8000
server:
  url: ${base_url}/v1
  port: ${oc.env:PORT,8080}
  retries: ${.max_retries}
  max_retries: 3
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := d.Resolve(func(string) (string, bool) { return "", false })
	if err != nil {
		fmt.Println(err)
		return
	}
	s := c.Root["server"].(map[string]any)
	fmt.Printf("%v %q %v\n", s["url"], s["port"], s["retries"])
	// Output: http://127.0.0.1:8000/v1 "8080" 3
}
