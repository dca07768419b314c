//! [`HttpCloud`] as a cloud provider: `cloudprovider.Interface` with its `InstancesV2`,
//! `LoadBalancer` and `Routes` parts (`k8s.io/cloud-provider`'s `cloud.go`), each call one or
//! a few calls of the simulated cloud's HTTP API.
//!
//! | interface call | HTTP |
//! | --- | --- |
//! | `instance_exists`, `instance_shutdown`, `instance_metadata` | `GET /v1/instances?id=ID` (from the provider ID) or `?name=NODE` |
//! | `get_load_balancer` | `GET /v1/loadbalancers/{name}` (404: `None`) |
//! | `ensure_load_balancer` | `PUT /v1/loadbalancers/{name}`, then `GET` it until it is active |
//! | `update_load_balancer` | `PUT /v1/loadbalancers/{name}/backends` |
//! | `ensure_load_balancer_deleted` | `DELETE /v1/loadbalancers/{name}` (404: done) |
//! | `list_routes`, `create_route`, `delete_route` | `GET /v1/routes?cluster=C`, `POST /v1/routes`, `DELETE /v1/routes/{name}` (404: done) |
//!
//! `ensure_load_balancer` returns only once the load balancer is active: the cloud answers a
//! new one at once as `provisioning` with the time it will be active, and the client polls it
//! until then (every 250 ms at most, [`HttpCloud::with_provisioning_wait`] at the longest), as
//! providers poll a cloud's long-running operations. The server never holds a request open,
//! so a provisioning delay longer than a call's deadline is fine.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use http::Method;
use jiff::Timestamp;

use crate::{
    CloudError, InstanceMetadata, InstancesV2, Interface, LoadBalancer, LoadBalancerIngress,
    LoadBalancerPort, LoadBalancerStatus, NodeRef, Route, Routes, ServiceRef,
    default_load_balancer_name,
};

use super::api::{CreateRouteRequest, EnsureLoadBalancerRequest, UpdateBackendsRequest};
use super::client::{HttpCloud, escape};
use super::instances::{CloudInstance, InstanceState, PROVIDER_NAME, instance_id_from_provider_id};
use super::load_balancers::{CloudLoadBalancer, LoadBalancerService, LoadBalancerState};
use super::routes::CloudRoute;

/// The longest pause between two looks at a provisioning load balancer.
const PROVISIONING_POLL: Duration = Duration::from_millis(250);

impl Interface for HttpCloud {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
}

#[async_trait]
impl InstancesV2 for HttpCloud {
    async fn instance_exists(&self, node: &NodeRef) -> Result<bool, CloudError> {
        match self.find_instance(node).await {
            Ok(_) => Ok(true),
            Err(CloudError::InstanceNotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn instance_shutdown(&self, node: &NodeRef) -> Result<bool, CloudError> {
        Ok(self.find_instance(node).await?.state == InstanceState::Stopped)
    }

    async fn instance_metadata(&self, node: &NodeRef) -> Result<InstanceMetadata, CloudError> {
        Ok(self.find_instance(node).await?.metadata())
    }
}

impl HttpCloud {
    /// The instance of `node` that is not terminated: by the instance id in its provider ID
    /// when it has one, else by its name.
    async fn find_instance(&self, node: &NodeRef) -> Result<CloudInstance, CloudError> {
        let query = match node.provider_id.as_deref().filter(|p| !p.is_empty()) {
            Some(provider_id) => {
                let id = instance_id_from_provider_id(provider_id).ok_or_else(|| {
                    CloudError::Api {
                        status: 400,
                        message: format!(
                            "node {}: providerID {provider_id:?} is not {PROVIDER_NAME}:///<zone>/<instance-id>",
                            node.name
                        ),
                    }
                })?;
                format!("id={}", escape(id))
            }
            None => format!("name={}", escape(&node.name)),
        };
        let instances: Vec<CloudInstance> = self.list(&format!("/v1/instances?{query}")).await?;
        instances
            .into_iter()
            .find(CloudInstance::is_live)
            .ok_or(CloudError::InstanceNotFound)
    }
}

#[async_trait]
impl LoadBalancer for HttpCloud {
    async fn get_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let path = lb_path(&self.get_load_balancer_name(cluster, service));
        match self
            .call::<CloudLoadBalancer>(Method::GET, &path, None::<&()>)
            .await
        {
            Ok(lb) => Ok(Some(status(&lb))),
            Err(CloudError::Api { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn get_load_balancer_name(&self, _cluster: &str, service: &ServiceRef) -> String {
        default_load_balancer_name(service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
        ports: &[LoadBalancerPort],
        nodes: &[NodeRef],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let name = self.get_load_balancer_name(cluster, service);
        let path = lb_path(&name);
        let request = EnsureLoadBalancerRequest {
            cluster: cluster.to_owned(),
            service: LoadBalancerService {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
                uid: service.uid.clone(),
            },
            ports: ports.to_vec(),
            backends: node_names(nodes),
        };
        let mut lb: CloudLoadBalancer = self.call(Method::PUT, &path, Some(&request)).await?;
        let deadline = Instant::now() + self.provisioning_wait;
        while lb.state == LoadBalancerState::Provisioning {
            let until_active = Timestamp::now()
                .duration_until(lb.active_at)
                .try_into()
                .unwrap_or(Duration::ZERO);
            let pause = until_active.clamp(Duration::from_millis(10), PROVISIONING_POLL);
            if Instant::now() + pause > deadline {
                return Err(CloudError::Unavailable(format!(
                    "load balancer {name} is still provisioning after {:?}",
                    self.provisioning_wait
                )));
            }
            tokio::time::sleep(pause).await;
            lb = self.call(Method::GET, &path, None::<&()>).await?;
        }
        Ok(status(&lb))
    }

    async fn update_load_balancer(
        &self,
        cluster: &str,
        service: &ServiceRef,
        _ports: &[LoadBalancerPort],
        nodes: &[NodeRef],
    ) -> Result<(), CloudError> {
        let path = format!(
            "{}/backends",
            lb_path(&self.get_load_balancer_name(cluster, service))
        );
        let request = UpdateBackendsRequest {
            backends: node_names(nodes),
        };
        let _: CloudLoadBalancer = self.call(Method::PUT, &path, Some(&request)).await?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster: &str,
        service: &ServiceRef,
    ) -> Result<(), CloudError> {
        let path = lb_path(&self.get_load_balancer_name(cluster, service));
        match self
            .call::<CloudLoadBalancer>(Method::DELETE, &path, None::<&()>)
            .await
        {
            Ok(_) | Err(CloudError::Api { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn lb_path(name: &str) -> String {
    format!("/v1/loadbalancers/{}", escape(name))
}

fn node_names(nodes: &[NodeRef]) -> Vec<String> {
    nodes.iter().map(|n| n.name.clone()).collect()
}

/// The status the service controller writes: one ingress, the load balancer's IP.
fn status(lb: &CloudLoadBalancer) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: vec![LoadBalancerIngress {
            ip: Some(lb.ingress_ip.to_string()),
            hostname: None,
            ip_mode: Some("VIP".to_owned()),
        }],
    }
}

#[async_trait]
impl Routes for HttpCloud {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<Route>, CloudError> {
        let routes: Vec<CloudRoute> = self
            .list(&format!("/v1/routes?cluster={}", escape(cluster)))
            .await?;
        Ok(routes
            .into_iter()
            .map(|r| Route {
                name: r.name,
                target_node: r.target_node,
                destination_cidr: r.destination_cidr,
                blackhole: r.blackhole,
            })
            .collect())
    }

    async fn create_route(
        &self,
        cluster: &str,
        name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        let request = CreateRouteRequest {
            name: format!("{cluster}-{name_hint}"),
            cluster: cluster.to_owned(),
            target_node: route.target_node.clone(),
            destination_cidr: route.destination_cidr.clone(),
        };
        let _: CloudRoute = self
            .call(Method::POST, "/v1/routes", Some(&request))
            .await?;
        Ok(())
    }

    async fn delete_route(&self, _cluster: &str, route: &Route) -> Result<(), CloudError> {
        let path = format!("/v1/routes/{}", escape(&route.name));
        match self
            .call::<CloudRoute>(Method::DELETE, &path, None::<&()>)
            .await
        {
            Ok(_) | Err(CloudError::Api { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
